"""`gradscope watch` end to end: exit codes, stdout kept for the report, crashes and
interrupts still reported, --steps, --log, --plot, CI formats and `gradscope check`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from watch_scripts import gradscope, script

from gradscope.cli import app
from gradscope.report import watch_plot

pytestmark = pytest.mark.slow


def test_json_on_stdout_stays_valid_while_the_script_prints(tmp_path, runner):
    """In-process: test_watch_outputs.py launches a script that writes to fd 1 natively,
    from child processes and after closing its stdout."""
    args = ["watch", script("recorded.py"), "-f", "json", "--", str(tmp_path / "s.json")]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["kind"] == "watch" and doc["version"] == 1
    assert doc["summary"]["steps"] == 40 and len(doc["steps"]) == 40
    assert len(doc["steps"][0]["param_norms"]) == len(doc["params"]) == 4
    assert "step 39 loss" in done.stderr  # the script's own prints


def test_findings_exit_1_and_terminal_report_fits_100_columns(runner):
    """In-process at 80 columns, as a launch gets them (the launches of test_sinks_cli.py
    and test_watch_tensorboard.py exit 1 on their findings across the process boundary)."""
    narrow = {"COLUMNS": "80", "NO_COLOR": "1"}
    done = runner.invoke(app, ["watch", script("no_zero_grad.py")], env=narrow)
    assert done.exit_code == 1, done.output
    assert "GS412 grads-not-reset" in done.stdout
    assert "gradient norm over steps 1-60" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 100
    # --fail-on maps the same findings to 0
    never = runner.invoke(app, ["watch", script("no_zero_grad.py"), "--fail-on", "never"])
    assert never.exit_code == 0 and "GS412 grads-not-reset" in never.stdout


def test_crash_still_reports_the_steps_then_exits_2(runner):
    """In-process: test_watch_crash.py launches a crashing script as a real process."""
    done = runner.invoke(app, ["watch", script("crash.py"), "-f", "json", "--", "raise"])
    assert done.exit_code == 2, done.output
    doc = json.loads(done.stdout)
    assert doc["summary"]["status"] == "crashed" and doc["summary"]["steps"] == 30
    assert "loss assertion failed at step 30" in done.stderr


def test_interrupt_reports_then_exits_130(runner):
    """The script's own KeyboardInterrupt, in-process (the real signals below cross the
    process boundary)."""
    done = runner.invoke(app, ["watch", script("crash.py"), "-f", "json", "--", "interrupt"])
    assert done.exit_code == 130
    assert json.loads(done.stdout)["summary"]["status"] == "interrupted"


def test_steps_stop_cleanly_and_log_streams_every_step(tmp_path, runner):
    log = tmp_path / "steps.jsonl"
    args = ["watch", script("crash.py"), "--steps", "12", "--log", str(log), "-f", "json"]
    done = runner.invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["status"] == "stopped"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines[0] == {"params": ["weight", "bias"], "dtype": "float32"}
    assert [line["step"] for line in lines[1:-1]] == list(range(1, 13))
    assert lines[-1] == {"findings": []}  # the run's findings, last


def test_plot_png_svg_and_pdf(tmp_path, runner, monkeypatch):
    """The CLI writes the plot; the other formats come from the same renderer."""
    drawn = []  # the report the CLI drew: the other formats render the same run
    render = watch_plot.render

    def kept(report, *args, **kwargs):
        drawn.append(report)
        return render(report, *args, **kwargs)

    monkeypatch.setattr(watch_plot, "render", kept)
    args = ["watch", script("spike_batch.py"), "--plot", str(tmp_path / "plot.png")]
    done = runner.invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "plot.png").stat().st_size > 10_000
    (report,) = drawn
    svg, pdf = (watch_plot.render(report, fmt) for fmt in ("svg", "pdf"))
    assert b"GS403" in svg  # the legend names the finding
    assert pdf.startswith(b"%PDF") and len(pdf) > 10_000


def test_bad_input_is_one_line_exit_2(tmp_path, runner):
    done = gradscope("watch", str(tmp_path / "missing.py"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    # the same exit path in-process: the launch above is the process boundary
    bad = runner.invoke(app, ["watch", script("crash.py"), "--threshold", "spike-sigmaa=3"])
    assert bad.exit_code == 2 and "spike-sigma" in bad.stderr and bad.stderr.count("\n") == 1


def test_junit_and_markdown(tmp_path, runner):
    args = ["watch", script("clip_tight.py"), "-f", "junit", "--fail-on", "warning"]
    done = runner.invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 1 and 'classname="gradscope.watch"' in done.stdout
    args = ["watch", script("clip_tight.py"), "-f", "markdown", "-o", str(tmp_path / "r.md")]
    done = runner.invoke(app, args, catch_exceptions=False)
    assert done.exit_code == 0 and "clipping-binds" in (tmp_path / "r.md").read_text()


def test_check_runs_watch_entries(tmp_path, runner, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.gradscope]\n"
        f"[[tool.gradscope.watch]]\nscript = {script('crash.py')!r}\nargs = ['exit']\nsteps = 5\n"
        f"[[tool.gradscope.watch]]\nscript = {script('no_zero_grad.py')!r}\n"
    )
    monkeypatch.chdir(tmp_path)
    done = runner.invoke(app, ["check", "-f", "json"], catch_exceptions=False)
    doc = json.loads(done.stdout)
    first, second = doc["results"]
    assert (
        first["kind"] == "watch" and first["passed"] and first["document"]["summary"]["steps"] == 5
    )
    assert not second["passed"] and second["findings"][0]["rule"] == "GS412"
    assert done.exit_code == 1


def test_help_imports_neither_torch_nor_matplotlib():
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom gradscope.cli import app\n"
        "r = CliRunner().invoke(app, ['watch', '--help'])\nassert r.exit_code == 0\n"
        "print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False False", done.stderr


@pytest.mark.parametrize(
    "signame, code, status, said",
    [
        ("SIGINT", 130, "interrupted", "interrupted after"),
        # what `timeout`, Slurm, Kubernetes and torchrun send
        ("SIGTERM", 143, "terminated", "terminated (SIGTERM) after"),
    ],
)
def test_a_real_signal_reports_the_steps_so_far_and_the_log_keeps_them(
    tmp_path, signame, code, status, said
):
    import signal
    import time

    log = tmp_path / "steps.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gradscope",
            "watch",
            script("forever.py"),
            "--log",
            str(log),
            "-f",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a suite started in the background (`make test &`) ignores SIGINT, and so would
        # the child: forever.py would outlive the test, on a CPU, for the rest of the suite
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if log.exists() and len(log.read_text().splitlines()) > 30:
                break
            time.sleep(0.2)
        proc.send_signal(getattr(signal, signame))
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == code, stderr
    doc = json.loads(stdout)
    assert doc["summary"]["status"] == status and doc["summary"]["steps"] >= 30
    logged = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    judged = [f["rule"] for f in logged[-1]["findings"]]  # judged after the signal, last
    assert judged == [f["rule"] for f in doc["findings"]]
    assert len(logged[:-1]) == doc["summary"]["steps"]
    assert said in stderr
