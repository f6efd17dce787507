"""watch never hurts the run it watches through its outputs, and loses nothing the user
had: a --log that cannot be written stops logging (the run goes on), a run with no step
leaves an existing --log as it was, outputs that name the script or each other are
refused before the script runs, and the report comes before the plot."""

from __future__ import annotations

import json
import os

import pytest
from watch_scripts import gradscope, script

from gradscope.cli import app


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_log_that_cannot_be_written_stops_logging_and_the_run_goes_on(tmp_path, runner):
    seen = tmp_path / "seen.json"
    args = ["watch", script("recorded.py"), "--log", "/dev/full", "-f", "json", "--", str(seen)]
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output  # a file asked for and not written
    assert len(json.loads(seen.read_text())) == 40  # the script ran every step
    summary = json.loads(done.stdout)["summary"]
    assert summary["steps"] == 40
    (note,) = [n for n in summary["notes"] if n.startswith("--log /dev/full")]
    assert "writing failed at step 1" in note and "No space left" in note
    assert done.stderr.splitlines()[-1] == f"gradscope: error: {note}"


@pytest.fixture
def file_size_limit():
    """`ulimit -f` for this process while the test runs: the soft limit only, which an
    unprivileged process may raise back (Python ignores SIGXFSZ, as a launch does)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    limit = 75_000 if hard == resource.RLIM_INFINITY else min(75_000, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.mark.parametrize("fail_on", ["error", "info"])
def test_a_log_past_the_file_size_limit_mid_run_is_said_and_exit_2(
    tmp_path, runner, file_size_limit, fail_on
):
    """`ulimit -f`: the log stops growing before 200 of 500 steps (EFBIG). Training goes
    on; the log keeps whole lines; one line names it and the step. In-process: the
    kernel's EFBIG is the same under this process's limit as under a launch's."""
    log = tmp_path / "steps.jsonl"
    args = ["watch", script("long_log.py"), "--log", str(log), "-f", "json", "--fail-on", fail_on]
    done = runner.invoke(app, args)
    assert done.exit_code == 2, done.output
    assert "trained 500 steps" in done.stderr
    assert json.loads(done.stdout)["summary"]["steps"] == 500  # the report covers them all
    lines = log.read_text().splitlines()
    # a write of the steps read back together lands whole or not at all; how many steps
    # one read-back holds depends on the machine's speed (at most 20 read-backs a second),
    # so under load the log may stop after its first batch of steps
    assert 0 < len(lines) - 1 < 200 and all(json.loads(line) for line in lines)
    stopped = json.loads(lines[-1])["step"] + 1
    last = done.stderr.splitlines()[-1]
    assert last == (
        f"gradscope: error: --log {log}: writing failed at step {stopped} (File too large); "
        f"the log stops after {stopped - 1} steps, the report covers them all"
    )


def test_a_run_that_records_no_step_leaves_an_existing_log_as_it_was(tmp_path, runner):
    log = tmp_path / "steps.jsonl"
    log.write_text("yesterday's run\n")
    done = runner.invoke(app, ["watch", script("crash_argparse.py"), "--log", str(log)])
    assert done.exit_code == 2, done.output
    assert log.read_text() == "yesterday's run\n"


@pytest.mark.parametrize(
    "options, message",
    [
        (["--log", "{script}"], "--log {script}: the same file as SCRIPT"),
        (["-o", "{script}"], "--output {script}: the same file as SCRIPT"),
        (["--log", "{out}", "-o", "{out}"], "--log {out}: the same file as --output"),
        (["--plot", "{png}", "-o", "{png}"], "--plot {png}: the same file as --output"),
    ],
)
def test_outputs_that_name_the_script_or_each_other_are_refused_first(
    tmp_path, runner, options, message
):
    """In-process: a refusal's exit 2 and one line are the real process's too
    (test_bad_input_is_one_line_exit_2 launches one)."""
    train = tmp_path / "train.py"
    train.write_text(open(script("recorded.py")).read())
    before = train.read_text()
    names = {"script": str(train), "out": str(tmp_path / "r.txt"), "png": str(tmp_path / "a.png")}
    args = [o.format(**names) for o in options]
    done = runner.invoke(app, ["watch", str(train), *args, "--", str(tmp_path / "seen.json")])
    assert done.exit_code == 2, done.output
    assert done.stderr.strip() == "gradscope: error: " + message.format(**names)
    assert train.read_text() == before and not (tmp_path / "seen.json").exists()


def test_a_plot_with_no_step_is_skipped_and_the_report_is_still_written(tmp_path, runner):
    report = tmp_path / "r.json"
    done = runner.invoke(app, [
        "watch", script("crash_argparse.py"), "--plot", str(tmp_path / "a.png"),
        "-f", "json", "-o", str(report),
    ])  # fmt: skip
    assert done.exit_code == 2, done.output
    assert json.loads(report.read_text())["summary"]["judged"] is False
    assert "--plot" in done.stderr and "not drawn, no step was recorded" in done.stderr
    assert not (tmp_path / "a.png").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["-t", "spike-min-ratio=0"], "--threshold spike-min-ratio=0: expected a number above 0"),
        (["-t", "spike-sigma=0"], "--threshold spike-sigma=0: expected a number above 0"),
        (["--width", "0"], "Invalid value for '--width'"),
    ],
)
def test_settings_that_would_fail_after_the_run_are_refused_before_it(
    tmp_path, runner, args, message
):
    """In-process; recorded.py writes what it saw when it ends: a refusal after the run
    would leave that file behind (and no hang in pytest's own process, as forever.py would)."""
    seen = tmp_path / "seen.json"
    done = runner.invoke(app, ["watch", script("recorded.py"), *args, "--", str(seen)])
    assert done.exit_code == 2 and message in done.stderr, done.output
    assert not seen.exists()  # refused before the script's first line


def test_a_zero_threshold_from_a_config_file_is_refused_with_its_key(tmp_path, runner):
    (tmp_path / "gs.toml").write_text("[thresholds]\nspike-min-ratio = 0\n")
    seen = tmp_path / "seen.json"
    args = ["watch", script("recorded.py"), "-c", str(tmp_path / "gs.toml"), "--", str(seen)]
    done = runner.invoke(app, args)
    assert done.exit_code == 2 and "thresholds.spike-min-ratio" in done.stderr, done.output
    assert not seen.exists()


def test_json_on_stdout_survives_native_writes_child_processes_and_a_closed_stdout():
    done = gradscope("watch", script("stdio_native.py"), "-f", "json")
    assert done.returncode == 2  # the script raised after its 3 steps
    doc = json.loads(done.stdout)  # nothing but the report on stdout
    assert doc["summary"]["steps"] == 3 and doc["summary"]["status"] == "crashed"
    assert done.stderr.count("native write to fd 1") == 3
    assert done.stderr.count("a child process prints") == 3
    # the script closed "its" stdout: gradscope's stderr still carries the status line
    assert "gradscope: error: stdio_native.py:" in done.stderr


def test_a_forked_child_that_runs_on_writes_no_report_and_no_log_lines(tmp_path):
    log = tmp_path / "steps.jsonl"
    done = gradscope("watch", script("fork_child.py"), "--log", str(log), "-f", "json")
    assert done.returncode == 0, done.stderr
    assert "parent saw child exit 0" in done.stderr
    doc = json.loads(done.stdout)  # one report: the parent's
    assert doc["summary"]["steps"] == 5
    lines = log.read_text().splitlines()  # the header, the steps, the parent's findings
    assert len(lines) == 1 + 5 + 1 and json.loads(lines[-1]) == {"findings": []}


def test_the_scripts_signal_handlers_are_undone_before_the_report(tmp_path):
    import signal

    from gradscope.watcher import watch_script

    (tmp_path / "handler.py").write_text(
        "import signal\n"
        "def on_usr1(signum, frame):\n"
        "    raise RuntimeError('the script is over')\n"
        "signal.signal(signal.SIGUSR1, on_usr1)\n"
    )
    before = signal.getsignal(signal.SIGUSR1)
    watch_script(str(tmp_path / "handler.py"))
    assert signal.getsignal(signal.SIGUSR1) is before


class _FullAfter:
    """A file that takes `room` bytes, then fails as a full disk does."""

    def __init__(self, file, room: int) -> None:
        self.file, self.room = file, room

    def write(self, data: bytes) -> int:
        if len(data) > self.room:
            self.file.write(data[: self.room])  # a part reached the disk: what a full one leaves
            self.file.flush()
            raise OSError(28, "No space left on device")
        self.room -= len(data)
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)


def test_a_findings_line_that_cannot_be_written_leaves_the_steps_whole(tmp_path):
    from watch_scripts import step_record

    from gradscope.watcher.step_log import StepLog

    path = tmp_path / "steps.jsonl"
    log = StepLog(str(path))
    log.write([step_record(1), step_record(2)], ["w"], [])
    whole = path.read_bytes()
    log.file = _FullAfter(log.file, room=10)
    log.end([])
    assert path.read_bytes() == whole  # the half line cut back: header and steps only
    assert log.failure == (
        f"--log {path}: writing the findings failed (No space left on device); "
        "the log holds the 2 steps, the report has the findings"
    )
    assert [json.loads(line).get("step") for line in whole.splitlines()] == [None, 1, 2]
