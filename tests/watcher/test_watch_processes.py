"""Processes the script starts are the script's: a DataLoader worker killed by a signal
is the user's run failing (exit 2, the steps so far reported), and a forked child (a
multiprocessing.Pool's worker) gets nothing of gradscope's: no traceback through its
code when the Pool ends it with SIGTERM, no log lines."""

from __future__ import annotations

import json
import os
import signal

import pytest
from watch_scripts import gradscope, script

from gradscope.errors import sigterm_raises


@pytest.mark.slow
def test_a_dataloader_worker_killed_by_a_signal_is_the_users_failure_with_a_partial_report():
    done = gradscope("watch", script("dataloader_killed.py"), "-f", "json")
    assert done.returncode == 2, done.stderr  # before: exit 3 in 7 runs of 8
    assert "internal error" not in done.stderr and "bug in gradscope" not in done.stderr
    doc = json.loads(done.stdout)
    assert doc["summary"]["steps"] == 50 and doc["summary"]["status"] == "crashed"
    last = done.stderr.splitlines()[-1]
    assert last.startswith("gradscope: error: dataloader_killed.py:")  # a line of its loop
    assert ": the script raised " in last
    assert last.endswith("(after 50 optimizer steps; the report covers them)")


@pytest.fixture(scope="module")
def forked(tmp_path_factory):
    """One launch of fork_child_then_pool.py, read by the two tests of forked children
    below: its steps.jsonl and the finished process."""
    log = tmp_path_factory.mktemp("forks") / "steps.jsonl"
    done = gradscope("watch", script("fork_child_then_pool.py"), "--log", str(log), "-f", "json")
    return done, log


@pytest.mark.slow
def test_a_pool_forked_by_the_script_gets_nothing_of_gradscopes(forked):
    done, log = forked
    assert done.returncode == 0, done.stderr
    assert "pool: [12, 12, 15]" in done.stderr  # the workers trained their own steps
    assert "ValueError: bad batch in a worker" in done.stderr  # the worker's own error
    assert "gradscope" not in done.stderr and "Terminated" not in done.stderr
    assert json.loads(done.stdout)["summary"]["steps"] == 12 + 20  # the parent's steps only
    lines = log.read_text().splitlines()  # the header, the steps, the findings
    assert len(lines) == 1 + 32 + 1 and "findings" in json.loads(lines[-1])  # none a worker's


def test_sigterm_in_a_forked_child_ends_it_as_without_gradscope():
    with sigterm_raises():
        pid = os.fork()
        if pid == 0:  # the child: ended by the signal, as a plain Python child would be
            os.kill(os.getpid(), signal.SIGTERM)
            os._exit(7)  # not reached
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGTERM


def test_a_child_forked_in_the_block_starts_with_the_handler_from_before_and_nothing_held():
    """SIGTERM is held across the fork, so one sent to a child before its after-fork set-up
    waits instead of being lost (a Pool's worker terminated that early never ended, and
    the Pool's join hung), and the child then handles it as it would without gradscope."""
    outside = signal.getsignal(signal.SIGTERM)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with sigterm_raises():
        pid = os.fork()
        if pid == 0:
            held = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])
            os._exit(0 if signal.getsignal(signal.SIGTERM) == outside and not held else 1)
        _, status = os.waitpid(pid, 0)
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask  # the parent's as before
        assert signal.getsignal(signal.SIGTERM) != outside  # and its own handler on
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.slow
def test_a_forked_child_that_raises_prints_its_own_traceback_and_no_log_lines(forked):
    done, log = forked
    assert done.returncode == 0, done.stderr  # the parent ran to its end
    assert "child exit 1" in done.stderr
    trace = done.stderr[: done.stderr.index("child exit 1")]
    assert trace.startswith("Traceback (most recent call last):")
    assert trace.rstrip().endswith("ValueError: the child failed")  # as Python prints it
    assert "gradscope" not in trace and "runpy" not in trace
    assert json.loads(done.stdout)["summary"]["steps"] == 12 + 20  # not the child's 12
    lines = log.read_text().splitlines()  # the header, the parent's steps only, its findings
    assert len(lines) == 1 + 32 + 1 and "findings" in json.loads(lines[-1])
