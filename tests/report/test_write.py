"""Outputs go to what the user named, and never replace it with something else."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time

import pytest

from gradscope.cli import app
from gradscope.errors import GradscopeError
from gradscope.report.write import append_to, destination, write_file


def test_a_regular_file_is_replaced_atomically_and_keeps_its_mode(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("old")
    os.chmod(path, 0o600)
    write_file(str(path), "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left


def test_a_new_file_gets_an_ordinary_mode(tmp_path):
    path = tmp_path / "r.txt"
    write_file(str(path), b"x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~mask


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_file(str(link), "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_fifo_is_written_directly(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    write_file(str(fifo), "through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_dev_null_stays_a_device(tmp_path):
    write_file("/dev/null", "nothing")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_device_is_one_clear_error():
    with pytest.raises(GradscopeError, match="cannot write /dev/full: No space left"):
        write_file("/dev/full", "x" * 100_000)


def test_paths_are_checked_and_made_absolute_before_work_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert destination("r.json") == str(tmp_path / "r.json")
    assert destination(None) is None and destination("-") == "-"
    for bad, problem in [
        ("", "empty path"),
        ("  ", "empty path"),
        (str(tmp_path), "it is a folder"),
        ("no/such/r.json", "does not exist"),
    ]:
        with pytest.raises(GradscopeError, match=problem):
            destination(bad)


def test_a_fifo_nobody_reads_is_an_error_not_a_wait(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(GradscopeError, match="no process read it within"):
        write_file(str(fifo), "nobody listens")
    assert time.monotonic() - start < 10 and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_step_summary_that_cannot_be_written_is_a_warning_not_the_verdict(
    runner, tmp_path, monkeypatch, capsys
):
    missing = tmp_path / "missing" / "summary.md"
    assert append_to(str(missing), "text") is False
    assert "warning: cannot append to" in capsys.readouterr().err
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(missing))
    result = runner.invoke(app, ["inspect", "healthy-mlp", "-f", "markdown", "-o", "-"])
    assert result.exit_code == 0 and "warning: cannot append to" in result.stderr


def test_a_reader_that_leaves_early_keeps_the_verdicts_exit_code(tmp_path):
    """`gradscope inspect ... | head`: the pipe breaks, the findings still give exit 1."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before gradscope writes
    done = subprocess.run(
        [sys.executable, "-m", "gradscope", "inspect", "detached-middle"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr


def test_the_cli_refuses_an_empty_output(runner):
    result = runner.invoke(app, ["inspect", "healthy-mlp", "--output", ""])
    assert result.exit_code == 2 and "--output: empty path" in result.stderr


def test_a_relative_output_does_not_follow_a_target_that_changes_directory(
    runner, tmp_path, monkeypatch
):
    (tmp_path / "sub").mkdir()
    (tmp_path / "wanders.py").write_text(
        "import os, torch\nfrom torch import nn\n"
        "def gradscope_target():\n"
        f"    os.chdir({str(tmp_path / 'sub')!r})\n"
        "    return nn.Linear(2, 1), torch.randn(3, 2)\n"
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["inspect", "wanders.py", "-o", "r.txt"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.txt").exists() and not (tmp_path / "sub" / "r.txt").exists()
