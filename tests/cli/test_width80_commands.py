"""Every command, run as a user runs it in an 80-column terminal: nothing it prints on
stdout is wider than 80 columns, and each report ends with its verdict paragraph.

On stderr gradscope's own messages are one line each (`gradscope: error: ...`, the line
a CI log is grepped for), left to the terminal to wrap; the rest of stderr is the
user's code's (a library's warning) and not gradscope's to shape."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "watcher" / "scripts"
WRONG_FN = "gradscope.examples.functions:SquareMissingFactor"
PORT = "tests/diff/diff_targets.py"

COMMANDS = {
    "inspect": ["inspect", "detached-middle"],
    "inspect-error": ["inspect", "no/such/model.py"],
    "gradcheck": ["gradcheck", WRONG_FN, "gradscope.examples.functions:ScaleIgnoresGradOutput"],
    "watch": ["watch", str(ROOT / "gradscope" / "examples" / "train_buggy.py")],
    "watch-crash": ["watch", str(SCRIPTS / "crash.py"), "--", "raise"],
    "diff": ["diff", f"{PORT}:gpt2_ref", f"{PORT}:gpt2_port_residual"],
    "rules": ["rules"],
    "rule": ["rules", "GS104"],
    "examples": ["examples"],
}
VERDICT = {"inspect", "gradcheck", "watch", "watch-crash", "diff"}


REAL_PROCESS = {"inspect"}
"""Run as a real `python -m gradscope` process, COLUMNS read from its environment; the
others in-process, where the runner reads the same COLUMNS and stdout is not a terminal
either (a launch each cost seconds of start-up and gave the same text)."""


def _env() -> dict[str, str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    return {k: v for k, v in env.items() if not k.startswith("GITHUB_")}


def _run(args: list[str]) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "gradscope", *args]
    return subprocess.run(
        command, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=300
    )


def _run_in_process(runner, monkeypatch, args: list[str]) -> subprocess.CompletedProcess:
    from gradscope.cli import app

    for key in [k for k in os.environ if k.startswith("GITHUB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(ROOT)
    done = runner.invoke(app, args)
    return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_fits_80_columns(name, runner, monkeypatch):
    if name in REAL_PROCESS:
        done = _run(COMMANDS[name])
    else:
        done = _run_in_process(runner, monkeypatch, COMMANDS[name])
    assert done.returncode in (0, 1, 2), done.stderr[-2000:]
    lines = done.stdout.rstrip().splitlines()
    assert [line for line in lines if len(line) > 80] == []
    if name in VERDICT:
        verdict = max(i for i, line in enumerate(lines) if line.startswith("verdict: "))
        assert all(line.startswith(" ") for line in lines[verdict + 1 :])
    if name == "watch":  # spike marks too, and the sparklines still a table beside names
        assert re.search(r"^  loss +[▁-█]", done.stdout, re.M)
        assert re.search(r"^  GS403 norm spike +\^", done.stdout, re.M)
