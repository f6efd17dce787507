"""The documented GitHub Actions workflow, command for command, on a fresh project: its
first run (no baseline yet) and a second run once the baseline is committed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "configs" / "github-actions.yml"

MODEL = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.aux = nn.Linear(4, 2)    # never called: a known issue the team adopts
    def forward(self, x):
        return self.body(x).pow(2).mean()

def build():
    torch.manual_seed(0)
    return Net(), torch.randn(8, 4)
"""

PYPROJECT = """
[project]
name = "fresh"
version = "0"
[[tool.gradscope.inspect]]
target = "healthy-mlp"
[[tool.gradscope.inspect]]
target = "model.py:build"
"""


def gradscope_steps() -> list[list[str]]:
    """Every `run: gradscope ...` of the workflow, as argv."""
    text = WORKFLOW.read_text()
    return [shlex.split(m) for m in re.findall(r"^\s*run: (gradscope .*)$", text, re.M)]


def adopt_command() -> list[str]:
    """The command the workflow's comment gives to write the baseline."""
    (line,) = re.findall(r"#\s+(gradscope check --write-baseline \S+)", WORKFLOW.read_text())
    return shlex.split(line)


def run(argv: list[str], cwd: Path, summary: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env.update(GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary), COLUMNS="80")
    command = [sys.executable, "-m", "gradscope", *argv[1:]]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def run_in_process(argv: list[str], cwd: Path, summary: Path, runner, monkeypatch):
    """The same command in-process, under the same environment: the runner gives the exit
    code, the streams and the files a launch gives, without a second start of Python, torch
    and check's fork server."""
    from gradscope.cli import app

    for key in [k for k in os.environ if k.startswith("GITHUB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.chdir(cwd)
    done = runner.invoke(app, argv[1:])
    return subprocess.CompletedProcess(argv, done.exit_code, done.stdout, done.stderr)


def junit_failures(path: Path) -> int:
    return int(ET.parse(path).getroot().get("failures", "-1"))


@pytest.mark.slow
def test_the_workflow_on_a_fresh_project_first_and_second_run(tmp_path, runner, monkeypatch):
    """The first run a real process (the exit code CI reads); the adoption and the second
    run in-process."""
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    summary = tmp_path / "summary.md"
    (step,) = gradscope_steps()  # one gradscope run writes every report

    first = run(step, tmp_path, summary)  # no baseline committed yet
    assert first.returncode == 1, first.stderr
    assert "no baseline .gradscope-baseline.json yet: every finding is judged" in first.stderr
    assert "cannot read baseline" not in first.stderr
    assert "verdict: FAIL" in first.stdout  # the terminal report in the log
    assert "::error file=model.py" in first.stdout  # annotations
    assert junit_failures(tmp_path / "gradscope.xml") == 1  # the verdict of the exit code
    assert "## gradscope" in (tmp_path / "gradscope.md").read_text()
    assert summary.read_text().count("## gradscope") == 1  # the step summary, once
    assert "[2/2] FAIL inspect model.py:build" in first.stderr

    adopt = run_in_process(adopt_command(), tmp_path, summary, runner, monkeypatch)
    assert adopt.returncode == 0, adopt.stderr
    assert (tmp_path / ".gradscope-baseline.json").is_file()

    second = run_in_process(step, tmp_path, summary, runner, monkeypatch)  # baseline committed
    assert second.returncode == 0, second.stderr
    assert "no baseline" not in second.stderr
    assert "verdict: PASS" in second.stdout
    assert junit_failures(tmp_path / "gradscope.xml") == 0
    assert "[2/2] PASS inspect model.py:build" in second.stderr  # as the verdict says
    assert "::error" not in second.stdout  # accepted findings are not annotated again
