"""The user's prints never reach a report on stdout: they go to stderr while their code runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

CHATTY = textwrap.dedent("""
    import os
    import torch
    from torch import nn

    print("hello from import")

    class Loud(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)
        def forward(self, x):
            print("hello from forward")
            os.write(1, b"raw bytes on fd 1\\n")
            return self.fc(x).sum()

    def gradscope_target():
        print("hello from the factory")
        return Loud(), torch.randn(2, 3)
""")


def _run(tmp_path, *args):
    (tmp_path / "chatty.py").write_text(CHATTY)
    return subprocess.run(
        [sys.executable, "-m", "gradscope", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_json_on_stdout_stays_json_and_prints_go_to_stderr(tmp_path):
    done = _run(tmp_path, "inspect", "chatty.py", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["summary"]["model"] == "Loud"
    for line in (
        "hello from import",
        "hello from the factory",
        "hello from forward",
        "raw bytes on fd 1",
    ):
        assert line in done.stderr
    markdown = _run(tmp_path, "check", "--format", "markdown", "--config", "gs.toml")
    assert markdown.returncode == 2  # no gs.toml: nothing leaks before the error either
    assert markdown.stdout == ""


@pytest.mark.slow
def test_prints_stay_on_stdout_when_the_report_goes_to_a_file(tmp_path):
    done = _run(tmp_path, "inspect", "chatty.py", "--format", "json", "-o", "r.json")
    assert done.returncode == 0, done.stderr
    assert "hello from forward" in done.stdout
    json.loads((tmp_path / "r.json").read_text())
