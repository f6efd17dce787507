"""The CLI's own lines (spinners, the progress bar of check) print the user's text as it is:
a target named `net[v2].py` is shown so, and `[/x]` in a name is not a markup tag (it made
an internal error, exit 3). The spinners draw only on a terminal, so the slow tests run
the command on a pseudo-terminal, as a user sees it."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import textwrap

import pytest

from gradscope.cli import app

MODEL = textwrap.dedent("""
    import torch
    from torch import nn

    def gradscope_target():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)), torch.randn(3, 4)
""")


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", "net[/x].py"],
        ["diff", "net[/x].py", "net[/x].py"],
        ["graph", "net[/x].py"],
        ["watch", "net[/x].py"],
        ["gradcheck", "net[/x].py:Fn"],
    ],
    ids=["inspect", "diff", "graph", "watch", "gradcheck"],
)
def test_a_closing_tag_in_a_target_is_a_missing_file_not_a_crash(
    runner, tmp_path, monkeypatch, args
):
    """One line that names the file exactly, exit 2 (not an internal MarkupError, 3)."""
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.splitlines() == ["gradscope: error: net[/x].py: no such file"]


def test_a_note_shows_the_name_as_it_is_and_no_control_character(capsys):
    """The CLI's informational lines print the user's text verbatim, never as markup, and
    an escape sequence in a name cannot repaint the terminal."""
    from gradscope.cli.common import note

    note("wrote net[v2].py and [bold]x[/bold]\x1b[2J")
    err = capsys.readouterr().err
    assert err.startswith("gradscope: wrote net[v2].py and [bold]x[/bold]")
    assert "\x1b" not in err


def on_a_terminal(cwd, *args: str) -> tuple[int, str]:
    """Run gradscope with stderr on a pseudo-terminal: its exit code and what it drew."""
    main, other = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradscope", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=other,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(other)
    drawn = b""
    while True:
        ready, _, _ = select.select([main], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    return proc.wait(timeout=60), drawn.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.parametrize("command", ["inspect", "diff", "check"])
def test_spinners_and_the_progress_bar_show_the_name_as_it_is(tmp_path, command):
    (tmp_path / "net[v2].py").write_text(MODEL)
    (tmp_path / "pyproject.toml").write_text('[[tool.gradscope.inspect]]\ntarget = "net[v2].py"\n')
    args = {
        "inspect": ["inspect", "net[v2].py"],
        "diff": ["diff", "net[v2].py", "net[v2].py"],
        "check": ["check"],
    }[command]
    code, drawn = on_a_terminal(tmp_path, *args)
    assert code == 0, drawn
    assert "net[v2].py" in drawn and "net.py" not in drawn
