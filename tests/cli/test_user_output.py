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


PRINTS_ON_FD_1 = textwrap.dedent("""
    import os
    import torch
    from torch import nn
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.ones(4, 2)).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
        print("printed by the script")
        os.write(1, b"written to fd 1 by the script\\n")
""")


@pytest.mark.slow
def test_watch_to_a_file_on_a_terminal_keeps_the_scripts_fd_1_off_the_report(tmp_path):
    """`gradscope watch train.py > report.txt` on a terminal: the status line is up (it wraps
    sys.stdout before the script runs), and what the script writes to descriptor 1 still
    goes to the terminal, not into report.txt."""
    import os
    import pty
    import threading

    (tmp_path / "train.py").write_text(PRINTS_ON_FD_1)
    master, slave = pty.openpty()
    with open(tmp_path / "report.txt", "wb") as report:
        done = subprocess.Popen(
            [sys.executable, "-m", "gradscope", "watch", "train.py"],
            cwd=tmp_path,
            stdin=slave,
            stdout=report,
            stderr=slave,
            env={**os.environ, "CI": ""},
        )
    os.close(slave)
    seen: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other side closed
                return
            if not chunk:
                return
            seen.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert done.wait(timeout=120) == 0
    reader.join(timeout=10)
    os.close(master)
    terminal = b"".join(seen).decode("utf-8", "replace")
    assert "gradscope: watch: step" in terminal  # the status line was on
    assert terminal.count("written to fd 1 by the script") == 3
    assert terminal.count("printed by the script") == 3
    text = (tmp_path / "report.txt").read_text()
    assert "3 optimizer steps" in text
    assert "by the script" not in text
