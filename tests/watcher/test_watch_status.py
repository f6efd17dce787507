"""Signs of life while `watch` runs: one live status line on a terminal's stderr (checked
in a pseudo-terminal), cleared before the script's own prints and at the end; absent
from a pipe; plain periodic lines in CI."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

import pytest

from gradscope.steps.records import StepRecord
from gradscope.watcher import status as status_mod

TRAIN = """
import logging
import sys
import torch
from torch import nn

logging.basicConfig(level=logging.INFO, format="%(message)s")  # holds sys.stderr from here
torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 41):
    x = torch.randn(8, 4)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 15 == 0:
        print(f"SCRIPT-OUT {step}", flush=True)
        print(f"SCRIPT-ERR {step}", file=sys.stderr, flush=True)
    if step % 25 == 0:
        logging.info(f"SCRIPT-LOG {step}")
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS")}
    return {**env, "COLUMNS": "100", "NO_COLOR": "1", **extra}


def _watch(tmp_path, stderr, *args: str, **env: str) -> subprocess.Popen:
    (tmp_path / "train.py").write_text(TRAIN)
    command = [sys.executable, "-m", "gradscope", "watch", "train.py", *args]
    return subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=stderr, env=_env(**env)
    )


def _read_all(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return out
        if not chunk:
            return out
        out += chunk


@pytest.mark.slow
def test_the_status_line_lives_on_a_terminal_and_never_mixes_with_the_script(tmp_path):
    master, slave = pty.openpty()
    proc = _watch(tmp_path, slave)
    os.close(slave)
    err = _read_all(master).decode()
    os.close(master)
    report = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.wait(timeout=300) == 0, err
    assert "\r\x1b[Kgradscope: watch: step 10 · loss " in err  # at the first read-back
    assert "steps/s" in err and "step 40 · loss" in err
    # the script's own lines start on a cleared line, never after the status text
    for line in ("SCRIPT-OUT 15", "SCRIPT-ERR 15", "SCRIPT-LOG 25", "SCRIPT-OUT 30"):
        same_line = err[: err.index(line)].rsplit("\n", 1)[-1]
        assert same_line in ("", "\r") or same_line.endswith("\r\x1b[K"), repr(same_line)
    # the run ends with the line cleared: the last status text is followed by a clear
    assert err.rindex("\r\x1b[K") > err.rindex("gradscope: watch: step")
    assert "gradscope watch · script train.py" in report and "SCRIPT-OUT" not in report


@pytest.mark.slow
def test_no_status_line_in_a_pipe_and_plain_lines_in_ci(tmp_path, runner, monkeypatch):
    """In-process: the runner's stderr is no terminal, as a pipe is not (the terminal
    above is a real process's)."""
    import logging

    from gradscope.cli import app
    from gradscope.watcher import recorder

    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(logging.root, "handlers", [])  # the script's basicConfig, undone after
    # ten steps of this tiny model can take under the least interval between read-backs
    # (then step 10's waits): the line is asked of the first read-back, wherever it falls
    monkeypatch.setattr(recorder, "MIN_FLUSH_INTERVAL_S", 0.0)
    for key in ("CI", "GITHUB_ACTIONS"):
        monkeypatch.delenv(key, raising=False)
    piped = runner.invoke(app, ["watch", "train.py"])
    err = piped.stderr
    assert piped.exit_code == 0 and "watch: step" not in err and "\x1b[K" not in err
    assert "SCRIPT-ERR 15" in err and "SCRIPT-LOG 25" in err  # the script's own stderr is read
    monkeypatch.setenv("CI", "true")
    ci = runner.invoke(app, ["watch", "train.py"])
    lines = [line for line in ci.stderr.splitlines() if "watch: step" in line]
    assert ci.exit_code == 0 and lines and lines[0].startswith("gradscope: watch: step 10 ")
    assert "\x1b" not in ci.stderr


def _record(step: int, loss: float, norm: float = 1.0) -> StepRecord:
    from watch_scripts import step_record

    return step_record(step, norm, loss)


def test_the_line_counts_non_finite_steps_and_is_off_under_json_on_a_terminal(monkeypatch):
    stream = io.StringIO()
    status = status_mod.Status("ci", stream)
    status([_record(1, 2.0), _record(2, float("nan"))], ["w"])
    assert "step 2 · loss nan" in stream.getvalue()
    assert "non-finite from step 2 (1)" in stream.getvalue()

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    assert status_mod.mode(machine_on_stdout=True) is None
    assert status_mod.mode(machine_on_stdout=False) == "tty"
