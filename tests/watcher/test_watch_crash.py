"""`gradscope watch` when the script fails or nothing could be judged: the script's own
traceback and a marked partial report after a crash, one clear line and exit 2 before the
first step or when no step was seen, and the user's text printed as it is (no markup)."""

from __future__ import annotations

import json
import os

import pytest
from watch_scripts import SCRIPTS, gradscope, script, step_record

from gradscope.cli import app
from gradscope.config import Settings
from gradscope.findings import RULES
from gradscope.report.console import View
from gradscope.report.watch_terminal import render
from gradscope.steps.records import MANUAL, ParamInfo, StepRecord, WatchRun
from gradscope.watcher.report import WatchReport

ESC = "\x1b"


def last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


# -- end to end: a subprocess where the process's streams are what is read (the script's
# traceback, the script's own stderr, one status line); the documents and the other exit-2
# paths in-process, where the runner gives the same exit code, streams and files


@pytest.fixture
def watch(runner, monkeypatch):
    """`gradscope watch ARGS` in-process, in the scripts' folder as gradscope() runs it."""
    monkeypatch.chdir(SCRIPTS)
    return lambda *args: runner.invoke(app, ["watch", *args])


@pytest.mark.slow
def test_crash_after_steps_prints_the_scripts_traceback_and_a_marked_partial_report():
    path = "crash_markup.py"
    done = gradscope("watch", path)
    assert done.returncode == 2, done.stderr
    out, err = done.stdout, done.stderr
    # the report: partial, the error as the script wrote it (brackets kept, no markup)
    flat = " ".join(out.split())  # rich wraps at 80 columns
    assert "partial   the report covers the 3 steps before the script crashed" in out
    assert "expected [batch, 3] got [4, 3] [/x] \\x1b[31mred\\x07" in flat
    assert "no findings" not in out.lower() and "GS411" in out
    assert "odd[/x][bold]nnn" in out  # the module's name as it is
    assert max(len(line) for line in out.splitlines()) <= 80
    # stderr: Python's traceback of the script (its frames only), then one status line
    assert "Traceback (most recent call last):" in err
    assert f'File "{path}", line 13, in check' in err and "line 21, in <module>" in err
    assert "runpy" not in err and f"{os.sep}gradscope{os.sep}watcher" not in err
    status = last_line(err)
    assert status.startswith("gradscope: error: ")
    assert "crash_markup.py:13: the script raised ValueError: expected [batch, 3]" in status
    assert "(after 3 optimizer steps; the report covers them)" in status
    assert ESC not in out + err and "\\x1b[31mred\\x07" in status  # control chars visible


@pytest.mark.slow
def test_crash_after_steps_in_json_keeps_the_steps_error_and_traceback(watch):
    done = watch("crash_markup.py", "-f", "json")
    assert done.exit_code == 2, done.output
    summary = json.loads(done.stdout)["summary"]
    assert summary["status"] == "crashed" and summary["steps"] == 3
    assert summary["judged"] and summary["partial"]
    assert summary["error"] == "ValueError: expected [batch, 3] got [4, 3] [/x] \x1b[31mred\x07"
    assert summary["where"] == "crash_markup.py:13"
    assert "line 13, in check" in summary["traceback"]


@pytest.mark.slow
def test_argparse_exit_before_the_first_step_is_one_line_and_no_report(tmp_path, watch):
    done = gradscope("watch", "crash_argparse.py")
    assert done.returncode == 2
    assert done.stdout == ""  # no empty report, no "no findings"
    assert "the following arguments are required: --data" in done.stderr  # the script's own
    assert last_line(done.stderr) == (
        "gradscope: error: crash_argparse.py:8: "
        "the script called sys.exit(2) (before any optimizer step)"
    )
    assert "Traceback" not in done.stderr
    out = tmp_path / "r.json"  # a CI document says what happened; never a clean verdict
    done = watch("crash_argparse.py", "-f", "json", "-o", str(out))
    assert done.exit_code == 2, done.output
    summary = json.loads(out.read_text())["summary"]
    assert summary["status"] == "crashed" and summary["verdict"] == "not judged"
    assert not summary["judged"] and summary["steps"] == 0
    assert summary["error"] == "the script called sys.exit(2)"
    assert summary["where"] == "crash_argparse.py:8"


@pytest.mark.slow
def test_exception_before_the_first_step_one_line_then_debug_brings_the_traceback(watch):
    path = "crash_before_step.py"
    done = watch(path)
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"gradscope: error: {path}:7: the script raised RuntimeError: ")
    assert "(before any optimizer step; rerun with --debug for the traceback)" in done.stderr
    done = watch(path, "--debug")
    assert done.exit_code == 2 and done.stdout == ""
    assert "Traceback (most recent call last):" in done.stderr
    assert f'File "{path}", line 12, in <module>' in done.stderr
    assert f'File "{path}", line 7, in forward' in done.stderr
    assert "rerun with --debug" not in done.stderr


@pytest.mark.slow
def test_syntax_error_is_one_line_with_its_place(tmp_path, runner, monkeypatch):
    bad = tmp_path / "train.py"
    bad.write_text("import torch\nx = (\n")
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["watch", "train.py"])
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr == (
        "gradscope: error: train.py:2: the script raised SyntaxError: '(' was never closed "
        "(before any optimizer step; rerun with --debug for the traceback)\n"
    )


@pytest.mark.slow
def test_backward_without_a_step_says_nothing_was_judged(runner):
    done = gradscope("watch", "crash_backward_only.py")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "gradscope: error: nothing was judged: 3 backward calls but no optimizer step or "
        "parameter update was seen\n"
    )
    # the formats in-process: the launch above is the process boundary
    done = runner.invoke(app, ["watch", script("crash_backward_only.py"), "-f", "json"])
    assert done.exit_code == 2
    summary = json.loads(done.stdout)["summary"]
    assert summary["verdict"] == "not judged" and summary["backward_calls"] == 3
    assert summary["status"] == "completed" and not summary["judged"]
    junit = runner.invoke(app, ["watch", script("crash_no_backward.py"), "-f", "junit"])
    assert junit.exit_code == 2
    assert "nothing was judged: the script ran no backward()" in junit.stdout
    assert "<error" in junit.stdout


# -- the terminal renderer, on plain data -------------------------------------------------


def _step(n: int, optimizer: int = 0, loss: float = 1.0, norms=(1.0, 2.0)) -> StepRecord:
    norm = sum(v * v for v in norms) ** 0.5
    return step_record(n, norm, loss, optimizer=optimizer, param_norms=tuple(norms))


def _report(run: WatchRun, findings=(), where=None) -> WatchReport:
    return WatchReport(run, list(findings), Settings().threshold_dict(), where=where)


HOSTILE = "[bold]x[/x]\x1b[2J\x07" + "w" * 90


def test_user_text_is_never_markup_and_control_characters_show():
    params = (
        ParamInfo(f"{HOSTILE}.weight", (3,), True, True, 0.1),
        ParamInfo("[red]b[/red].bias", (3,), True, True, 0.1),
    )
    run = WatchRun(
        label="script [/x]train.py",
        params=params,
        steps=tuple(_step(n) for n in range(1, 6)),
        status="crashed",
        duration_s=1.0,
        error="ValueError: expected [batch, 3] got [4, 3] [/x]\x1b",
        optimizers=("SGD",),
        members=((0, 1),),
    )
    finding = RULES["GS413"].finding(params[0].name, f"{HOSTILE} [/x] got no gradient", "fix [/x]")
    text = render(_report(run, [finding], where="t[/x].py:3"), View(width=80))
    flat = " ".join(text.split())
    failure = "t[/x].py:3: the script raised ValueError: expected [batch, 3] got [4, 3] [/x]"
    assert f"· crashed error {failure}\\x1b" in flat
    assert "script [/x]train.py" in text
    assert "[bold]x[/x]\\x1b[2J\\x07www" in text and "[/x] got no gradient" in text
    assert "fix [/x]" in text and "[red]b[/red]" in text
    assert ESC not in text and "\x07" not in text
    assert "partial   the report covers the 5 steps before the script crashed" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def _gan() -> WatchReport:
    params = tuple(
        ParamInfo(n, (3,), True, True, 0.1)
        for n in ("D.0.weight", "D.2.bias", "G.0.weight", "G.2.bias")
    )
    steps = []
    for n in range(1, 21):
        d = _step(2 * n - 1, 0, 0.7, (1.0, 1.0, 0.0, 0.0))
        g = _step(2 * n, 1, 3.0, (0.0, 0.0, 3.0, 4.0))
        steps += [d, g]
    steps.append(_step(41, 2, 9.0, (0.5, 0.5, 0.5, 0.5)))
    run = WatchRun(
        label="script gan.py",
        params=params,
        steps=tuple(steps),
        status="completed",
        duration_s=1.0,
        optimizers=("Adam", "Adam", MANUAL),
        members=((0, 1), (2, 3), (0, 1, 2, 3)),
    )
    return _report(run)


def test_several_optimizers_are_reported_one_by_one():
    report = _gan()
    text = render(report, View(width=80))
    assert "optimizer 0 (Adam, D): 20 steps · loss 0.7 → 0.7" in text
    assert "optimizer 1 (Adam, G): 20 steps · loss 3 → 3" in text
    assert "manual update: 1 step · loss 9 → 9" in text
    assert "optimizer 0 (Adam, D): gradient norm over its 20 steps" in text
    assert "optimizer 1 (Adam, G): gradient norm over its 20 steps" in text
    assert "manual update: gradient norm over its 1 step" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    per = report.to_dict()["summary"]["per_optimizer"]
    assert [(p["label"], p["steps"], p["manual"]) for p in per] == [
        ("optimizer 0 (Adam, D)", 20, False),
        ("optimizer 1 (Adam, G)", 20, False),
        (MANUAL, 1, True),
    ]
    assert per[1]["loss"] == {"first": 3.0, "last": 3.0, "min": 3.0, "max": 3.0}
    assert per[1]["grad_norm"]["last"] == 5.0


def test_the_plot_draws_each_optimizers_loss_and_norm_apart():
    pytest.importorskip("matplotlib")
    from gradscope.report import watch_plot

    svg = watch_plot.render(_gan(), "svg").decode()
    for label in ("optimizer 0 (Adam, D)", "optimizer 1 (Adam, G)", "manual update"):
        assert f"{label}: grad norm" in svg  # the norm panel's legend
        assert svg.count(label) >= 2  # and the loss panel's
