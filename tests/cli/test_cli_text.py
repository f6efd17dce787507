"""The CLI's own lines (spinners, the progress bar of check) print the user's text as it is:
a target named `net[v2].py` is shown so, and `[/x]` in a name is not a markup tag (it made
an internal error, exit 3). The spinners draw only on a terminal, so the slow tests run
the command on a pseudo-terminal, as a user sees it."""

from __future__ import annotations

import json
import os
import pty
import re
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


TERMINAL_COMMANDS = {
    "inspect": ["inspect", "net[v2].py"],
    "diff": ["diff", "net[v2].py", "net[v2].py"],
    "check": ["check"],
}

DRIVER = """
import json, sys
from gradscope.cli.root import main
for name, args in json.loads(sys.argv[1]).items():
    sys.argv = ["gradscope", *args]
    try:
        main()
        code = 0
    except SystemExit as exit:
        code = exit.code or 0
    print(f"\\n@@ {name} exit {code} @@", file=sys.stderr, flush=True)
"""
"""The three commands one after the other in one process, as `gradscope` runs each (its
main(), stderr on the terminal), each part of the terminal's text ended by a marker:
a launch each cost seconds of start-up (torch, and check's fork server)."""


def on_a_terminal(cwd, commands: dict[str, list[str]]) -> str:
    """Run the commands with stderr on a pseudo-terminal: what they drew."""
    main, other = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(commands)],
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
    assert proc.wait(timeout=60) == 0, drawn[-2000:]
    return drawn.decode(errors="replace")


@pytest.fixture(scope="module")
def drawn_on_a_terminal(tmp_path_factory) -> dict[str, tuple[int, str]]:
    """Each command's exit code and what it drew, from one run of the three."""
    cwd = tmp_path_factory.mktemp("terminal")
    (cwd / "net[v2].py").write_text(MODEL)
    (cwd / "pyproject.toml").write_text('[[tool.gradscope.inspect]]\ntarget = "net[v2].py"\n')
    drawn = on_a_terminal(cwd, TERMINAL_COMMANDS)
    parts = re.split(r"@@ (\w+) exit (-?\d+) @@", drawn)
    # [drawn by the first, its name, its code, drawn by the second, ...]
    texts, names, codes = parts[0::3][:-1], parts[1::3], parts[2::3]
    assert names == list(TERMINAL_COMMANDS), drawn[-2000:]
    return {name: (int(code), text) for name, code, text in zip(names, codes, texts, strict=True)}


@pytest.mark.slow
@pytest.mark.parametrize("command", list(TERMINAL_COMMANDS))
def test_spinners_and_the_progress_bar_show_the_name_as_it_is(drawn_on_a_terminal, command):
    code, drawn = drawn_on_a_terminal[command]
    assert code == 0, drawn
    assert "net[v2].py" in drawn and "net.py" not in drawn
