"""The diff of two runs on real `gradscope watch --log` files: a small real training script
(tests/diff/runs_scripts/train_mlp.py) run once per setting, each run differing from the
reference by one change, found at the right step and parameter. The runs are made once
for the module, in-process, and shared by the assertions; one more, `watch --against`,
runs the CLI (in-process) to see the divergence announced live."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradscope.cli.root import app
from gradscope.diff.runs import RunsOptions, diff_logs
from gradscope.findings import Severity
from gradscope.watcher import watch_script

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "runs_scripts" / "train_mlp.py"
RUNS = {
    "ref": [],
    "same": [],
    "lr": ["--lr-from", "20:0.1"],
    "seed": ["--seed", "1"],
    "data": ["--data-seed", "1"],
    "freeze": ["--freeze", "2"],
    "zero": ["--lr", "0"],
    "tiny": ["--lr", "1e-5"],
    "short": ["--steps", "40"],
}


def watch(log: Path, args: list[str], *extra: str):
    """`gradscope watch` of the script in-process: the runner gives the exit code and the
    stderr a launch gives (the live announcement is a line gradscope writes there)."""
    command = ["watch", str(SCRIPT), "--log", str(log), *extra, "-f", "json", "-o", os.devnull]
    return CliRunner().invoke(app, [*command, "--", "--steps", "60", *args], env={"COLUMNS": "80"})


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("runs")
    paths = {name: folder / f"{name}.jsonl" for name in RUNS}
    for name, args in RUNS.items():
        report = watch_script(str(SCRIPT), ["--steps", "60", *args], log=str(paths[name]))
        steps = 40 if name == "short" else 60
        assert report.run.status == "completed" and len(report.run.steps) == steps, name
    live = watch(folder / "live.jsonl", RUNS["lr"], "--against", str(paths["ref"]))
    # the comparison's GS607 runs-diverge joins watch's findings: exit 1
    assert live.exit_code == 1, live.output[-2000:]
    (folder / "live.stderr").write_text(live.stderr)
    lines = paths["ref"].read_text().splitlines()
    header = json.loads(lines[0])
    wrapped = folder / "ddp.jsonl"  # the same run as a DDP model names it
    wrapped.write_text(
        "\n".join([json.dumps({"params": ["module." + n for n in header["params"]]}), *lines[1:]])
        + "\n"
    )
    assert json.loads(lines[-1])["findings"] is not None  # the log's last line, once judged
    steps = lines[:-1]  # a process killed mid-step never writes it
    text = "\n".join(steps) + "\n"
    cut = folder / "cut.jsonl"  # a crash in the middle of writing the last step
    cut.write_text(text[: len(text) - len(steps[-1]) // 2 - 1])
    out = {name: str(p) for name, p in paths.items()}
    out.update(ddp=str(wrapped), cut=str(cut), live_stderr=str(folder / "live.stderr"))
    return out


def test_identical_deterministic_runs_are_bitwise_identical(logs):
    result = diff_logs(logs["ref"], logs["same"], RunsOptions(exact=True))
    assert result.verdict() == "identical (bitwise)" and result.common == {0: 60}
    assert result.findings == [] and all(t.trained for t in result.training)


def test_a_learning_rate_change_is_found_the_step_after_it_applies(logs):
    result = diff_logs(logs["ref"], logs["lr"])
    # the new rate applies at step 20's update; step 21's gradients are the first it changes
    assert result.first.step == 21 and result.lr_differs[1] == 20
    assert {p.step for p in result.parting} == {21}
    assert result.findings[0].rule == "GS607" and result.outcome().failed(Severity.ERROR)
    assert any("learning rates differ from step 20" in e for e in result.findings[0].evidence)


@pytest.mark.parametrize("name", ["seed", "data"])
def test_another_seed_or_data_order_parts_at_the_first_step(logs, name):
    result = diff_logs(logs["ref"], logs[name])
    assert result.first.step == 1
    subjects = {g.subject for g in result.first.gaps}
    assert "loss" in subjects and len(result.parting) == 6


def test_a_frozen_layer_parts_first_and_alone(logs):
    result = diff_logs(logs["ref"], logs["freeze"])
    first = [p.ref for p in result.parting if p.step == 1]
    assert sorted(first) == ["2.bias", "2.weight"]  # the rest follows a step later
    assert {p.step for p in result.parting if p.ref not in first} == {2}
    assert result.findings[0].subject in first


def test_a_run_that_did_not_train_is_flagged_even_within_tolerance(logs):
    # lr 0 against lr 1e-5: the same within 5%, and neither learned anything
    result = diff_logs(logs["tiny"], logs["zero"], RunsOptions(rtol=0.05))
    assert not result.differs
    flagged = {f.subject.split(" ")[0]: f.severity for f in result.findings if f.rule == "GS608"}
    # lr 0: the weights never moved, an error; lr 1e-5 moved them, but the loss stayed
    assert flagged == {"new": Severity.ERROR, "ref": Severity.WARNING}
    healthy = diff_logs(logs["ref"], logs["zero"])
    assert {t.run: t.trained for t in healthy.training} == {"ref": True, "new": False}


def test_runs_of_different_lengths_compare_the_common_steps(logs):
    result = diff_logs(logs["ref"], logs["short"])
    assert result.common == {0: 40} and result.lengths["ref"] == {0: 60}
    assert not result.differs and [f.rule for f in result.findings] == ["GS609"]


def test_a_module_prefixed_copy_pairs_and_agrees(logs):
    result = diff_logs(logs["ref"], logs["ddp"], RunsOptions(exact=True))
    assert {how for _, _, how in result.pairs} == {"stripped"} and len(result.pairs) == 6
    assert result.verdict() == "identical (bitwise)"


def test_a_log_cut_mid_line_is_read_up_to_its_last_whole_step(logs):
    result = diff_logs(logs["ref"], logs["cut"], RunsOptions(exact=True))
    assert result.common == {0: 59} and not result.differs
    assert any("cut short" in n for n in result.notes)


def test_watch_against_announces_the_divergence_live(logs):
    stderr = Path(logs["live_stderr"]).read_text()
    announced = [line for line in stderr.splitlines() if "parts from the reference" in line]
    assert len(announced) == 1 and "at step 21" in announced[0]
    assert "the runs differ from step 21 of 60 compared" in stderr
    assert "this run trained" in stderr


def test_cli_exit_codes_json_terminal_and_plot(logs, tmp_path):
    runner = CliRunner()
    env = {"COLUMNS": "80"}
    same = runner.invoke(app, ["diff", logs["ref"], logs["same"], "--exact"], env=env)
    assert same.exit_code == 0, same.output
    png = tmp_path / "runs.png"
    differ = runner.invoke(app, ["diff", logs["ref"], logs["lr"], "--plot", str(png)], env=env)
    assert differ.exit_code == 1
    assert max(len(line) for line in differ.stdout.splitlines()) <= 80
    assert "✗ the runs part at step 21" in differ.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(runner.invoke(app, ["diff", logs["ref"], logs["zero"], "-f", "json"]).stdout)
    assert doc["mode"] == "runs" and doc["summary"]["trained"] == {"ref": True, "new": False}
    flat = runner.invoke(app, ["diff", logs["tiny"], logs["zero"], "--rtol", "0.05"], env=env)
    assert flat.exit_code == 1 and "did not train" in flat.stdout
