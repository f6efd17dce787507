"""The one exit-code boundary: 2 for the user's code (sys.exit included), 3 for gradscope's bugs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gradscope.cli import app
from gradscope.errors import ExitCode

USER = textwrap.dedent("""
    import sys
    import torch
    from torch import nn

    class Quits(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 1)
        def forward(self, x):
            sys.exit(0)

    class Custom(BaseException):
        pass

    class Vanishes(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 1)
        def forward(self, x):
            import os
            os._exit(0)

    def hard_exit():
        return Vanishes(), torch.randn(2, 2)

    def exits_zero():
        sys.exit(0)

    def exits_three():
        sys.exit(3)

    def forward_exits():
        return Quits(), torch.randn(2, 2)

    def base_exception():
        raise Custom("not an Exception")

    def shouts():
        raise RuntimeError("\\x1b[31mred alert\\x00 [bold]x[/bold]")

    def healthy():
        return nn.Linear(2, 1), torch.randn(3, 2)
""")


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(USER.splitlines(), 1) if text in line)


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "user.py").write_text(USER)
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "user.py:exits_zero",
            f"user.py:{line_of('def exits_zero') + 1}: user.py:exits_zero() called sys.exit(0)",
        ),
        ("user.py:exits_three", "called sys.exit(3)"),
        (
            "user.py:forward_exits",
            f"user.py:{line_of('sys.exit(0)')}: your code called sys.exit(0)",
        ),
        ("user.py:base_exception", "raised Custom: not an Exception"),
        (
            "exits_on_import.py:build",
            "exits_on_import.py:2: importing exits_on_import.py called sys.exit(0)",
        ),
    ],
)
def test_user_code_never_decides_the_exit_code(runner, project, target, message):
    result = runner.invoke(app, ["inspect", target], catch_exceptions=False)
    assert result.exit_code == ExitCode.ERROR, result.output
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_script_that_exits_before_backward_is_exit_2(runner, project):
    result = runner.invoke(app, ["inspect", "exits_on_import.py"], catch_exceptions=False)
    assert result.exit_code == ExitCode.ERROR
    assert "exits_on_import.py exited (code 0) before calling backward()" in result.stderr


def test_an_internal_error_is_exit_3_with_one_line(runner, project, monkeypatch):
    from gradscope import rules

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in a rule")

    monkeypatch.setattr(rules, "diagnose", broken)
    result = runner.invoke(app, ["inspect", "user.py:healthy"], catch_exceptions=False)
    assert result.exit_code == ExitCode.INTERNAL == 3
    (line,) = result.stderr.strip().splitlines()
    assert "internal error: ZeroDivisionError: a bug in a rule" in line
    assert "please report it" in line
    debug = runner.invoke(app, ["inspect", "user.py:healthy", "--debug"], catch_exceptions=False)
    assert debug.exit_code == 3 and "Traceback" in debug.stderr and "broken" in debug.stderr


@pytest.mark.slow
def test_last_resort_boundary_outside_every_command(tmp_path):
    """Whatever escapes a command's own boundary still exits 3, not 1 with a traceback."""
    code = (
        "import sys, typer\n"
        "import gradscope.cli.root as app_mod\n"
        "@app_mod.app.command('boom')\n"
        "def boom() -> None:\n"
        "    raise ValueError('escaped')\n"
        "sys.argv = ['gradscope', 'boom']\n"
        "app_mod.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines() == [
        "gradscope: error: internal error: ValueError: escaped (this is a bug in gradscope; "
        "please report it with the output of --debug)"
    ]


def test_one_target_calling_sys_exit_does_not_end_check(runner, project):
    (project / "gs.toml").write_text(
        "[[inspect]]\ntarget = 'user.py:forward_exits'\n"
        "[[inspect]]\ntarget = 'user.py:healthy'\n"
        "[[inspect]]\ntarget = 'user.py:exits_zero'\n"
    )
    result = runner.invoke(
        app, ["check", "--config", "gs.toml", "--format", "json", "-o", "r.json"]
    )
    assert result.exit_code == ExitCode.ERROR, result.output
    import json

    doc = json.loads((project / "r.json").read_text())
    errors = [r["error"] for r in doc["results"]]
    assert "called sys.exit(0)" in errors[0] and errors[1] is None
    assert "called sys.exit(0)" in errors[2]


def test_os_exit_in_one_target_fails_that_target_only(runner, project):
    """os._exit cannot be caught: check runs targets in a worker process and replaces it."""
    (project / "gs.toml").write_text(
        "[[inspect]]\ntarget = 'user.py:hard_exit'\n"
        "[[inspect]]\ntarget = 'user.py:healthy'\n"
        "[[inspect]]\ntarget = 'user.py:hard_exit'\n"
    )
    result = runner.invoke(
        app, ["check", "--config", "gs.toml", "--format", "json", "-o", "r.json"]
    )
    assert result.exit_code == ExitCode.ERROR, result.output
    import json

    doc = json.loads((project / "r.json").read_text())
    errors = [r["error"] for r in doc["results"]]
    assert "ended gradscope's worker process (exit code 0)" in errors[0]
    assert errors[1] is None and "os._exit()" in errors[2]


def test_control_characters_from_user_errors_never_reach_the_terminal_raw(runner, project):
    result = runner.invoke(app, ["inspect", "user.py:shouts"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr and "\x00" not in result.stderr
    assert "\\x1b[31mred alert\\x00 [bold]x[/bold]" in result.stderr


OS_EXITS = textwrap.dedent("""
    import os
    import torch
    from torch import nn

    def factory_exits():
        os._exit(0)

    class ForwardExits(nn.Linear):
        def forward(self, x):
            os._exit(0)

    def forward_exits():
        return ForwardExits(2, 1), torch.randn(3, 2)

    def forks_a_child():
        pid = os.fork()
        if pid == 0:  # the child ends itself, as a DataLoader worker does
            os._exit(0)
        os.waitpid(pid, 0)
        return nn.Linear(2, 1), torch.randn(3, 2)
""")


@pytest.mark.parametrize("target", ["factory_exits", "forward_exits"])
def test_os_exit_in_the_users_code_never_ends_gradscope_with_success(tmp_path, target):
    """os._exit ends a process without unwinding: gradscope's process must still exit 2."""
    (tmp_path / "exits.py").write_text(OS_EXITS)
    done = subprocess.run(
        [sys.executable, "-m", "gradscope", "inspect", f"exits.py:{target}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == ExitCode.ERROR, done.stderr
    assert "called os._exit(0)" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_forked_child_still_ends_itself_with_os_exit(tmp_path):
    (tmp_path / "exits.py").write_text(OS_EXITS)
    done = subprocess.run(
        [sys.executable, "-m", "gradscope", "inspect", "exits.py:forks_a_child", "-f", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == ExitCode.OK, done.stderr
    import json

    assert json.loads(done.stdout)["summary"]["verdict"] == "ok"  # one report: the parent's


TRAINS = """
import os
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.ones(4, 2)).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
if os.environ.get("CRASH"):
    raise ValueError("boom · ü")
"""


def _watch(tmp_path, *args: str, env: dict[str, str] | None = None, shell: str = ""):
    """`gradscope watch train.py ARGS`, its streams as `shell` redirects them."""
    import os

    (tmp_path / "train.py").write_text(TRAINS)
    command = [sys.executable, "-m", "gradscope", "watch", "train.py", *args]
    return subprocess.run(
        ["sh", "-c", f'"$@" {shell}', "sh", *command],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _in_ascii(stdout: bytes) -> None:
    """The report of the crashed run on an ascii-only stdout: ascii, the crash's text escaped."""
    text = stdout.decode("ascii")
    assert "3 optimizer steps" in text and " -> " in text and "boom - \\xfc" in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("crash", "code", "env"),
    [("", ExitCode.OK, {}), ("1", ExitCode.ERROR, {"PYTHONIOENCODING": "ascii"})],
    ids=["completed", "crashed, PYTHONIOENCODING=ascii"],
)
def test_with_stderr_closed_the_report_is_written_and_the_exit_code_right(
    tmp_path, crash, code, env
):
    """One run, both outputs (`-o -` keeps the terminal report on stdout): each is written
    with stderr closed, and the exit code is the run's. The crashed run's stdout encodes
    ascii only (PYTHONIOENCODING): its report comes in ascii, with no stderr to say a word."""
    done = _watch(tmp_path, "-o", "r.json", "-o", "-", env={"CRASH": crash, **env}, shell="2>&-")
    assert done.returncode == code
    assert b"3 optimizer steps" in done.stdout
    import json

    assert json.loads((tmp_path / "r.json").read_text())["kind"] == "watch"
    if crash:
        _in_ascii(done.stdout)


@pytest.mark.slow
def test_an_ascii_only_stdout_gets_the_report_in_ascii(tmp_path):
    """The C locale, stderr open (the crashed run above sets PYTHONIOENCODING instead)."""
    env = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "CRASH": "1"}
    done = _watch(tmp_path, env={**env, "PYTHONCOERCECLOCALE": "0"})
    assert done.returncode == ExitCode.ERROR, done.stderr  # the crash: not 3
    assert b"the script raised ValueError: boom \\xb7 \\xfc" in done.stderr  # ascii, escaped
    _in_ascii(done.stdout)


def test_an_ascii_only_stdout_gets_the_json_report_in_ascii(tmp_path, monkeypatch):
    """In-process, on a stdout whose encoding is ascii: gradscope writes for
    sys.stdout.encoding, which the launches above show either environment sets."""
    import json

    from typer.testing import CliRunner

    (tmp_path / "train.py").write_text(TRAINS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRASH", "1")
    machine = CliRunner(charset="ascii").invoke(app, ["watch", "train.py", "--format", "json"])
    assert machine.exit_code == ExitCode.ERROR, machine.output
    assert machine.stdout_bytes.isascii()
    assert "boom · ü" in json.dumps(json.loads(machine.stdout), ensure_ascii=False)


def test_ctrl_c_before_the_script_runs_says_the_output_was_not_written(
    runner, tmp_path, monkeypatch
):
    from gradscope import api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # as if during torch's import, before the script's first line

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAINS)
    monkeypatch.setattr(api, "watch_script", interrupted)
    done = runner.invoke(app, ["watch", "train.py", "-o", "r.json", "-o", "r.xml", "-o", "-"])
    assert done.exit_code == ExitCode.INTERRUPTED
    assert done.stderr.splitlines() == [
        "gradscope: error: interrupted before there was a report: r.json, r.xml not written"
    ]
    assert not (tmp_path / "r.json").exists()
    plain = runner.invoke(app, ["watch", "train.py"])
    assert plain.exit_code == ExitCode.INTERRUPTED
    assert plain.stderr.splitlines() == ["gradscope: error: interrupted"]
