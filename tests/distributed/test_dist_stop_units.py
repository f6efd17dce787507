"""Stopping a distributed run, one piece at a time in one process: the launch's exit code
and signal forwarding, SIGTERM noted after the script, ranks that vanished, a terminated
rank 0's report, the watcher's step count in the hang block, and a rank's child
processes (real processes, a fake store)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from gradscope.distributed import launch, peers, proctree
from gradscope.distributed.hang_block import RankState, summary
from gradscope.distributed.hang_progress import moved
from gradscope.distributed.stopping import TermNote
from gradscope.distributed.watchdog import Watchdog
from gradscope.errors import Terminated
from gradscope.outcome import exit_code
from gradscope.watcher import crash_meeting, distributed_hooks
from gradscope.watcher.distributed_hooks import DistributedWatch


class _Store:
    """The calls of a c10d store that gradscope makes."""

    def __init__(self):
        self.keys: dict[str, str] = {}

    def set(self, key, value):
        self.keys[key] = value

    def check(self, keys):
        return all(k in self.keys for k in keys)

    def get(self, key):
        return self.keys[key].encode()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# the launch's exit code -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("torchrun", "rank0", "signalled", "expected"),
    [
        (0, 0, None, 0),  # healthy
        (0, 1, None, 1),  # findings: rank 0's verdict
        (1, 2, None, 2),  # a rank crashed and rank 0 said so
        (1, 1, None, 1),  # findings, then torchrun failed at teardown: the verdict stands
        (1, None, None, 2),  # rank 0 killed before it wrote: never torchrun's 1
        (1, 143, None, 143),  # SIGTERM straight to the ranks (Slurm), no rank to blame
        (1, 2, signal.SIGTERM, 143),  # the launch itself was stopped from outside
        (1, None, signal.SIGINT, 130),
        (0, None, None, 0),
        (1, 77, None, 2),  # not a code of gradscope's: never passed on
    ],
)
def test_exit_code_maps_torchruns_outcome_onto_gradscopes_contract(
    torchrun, rank0, signalled, expected
):
    assert launch.exit_code(torchrun, rank0, signalled) == expected


_FAKE_TORCHRUN = textwrap.dedent(
    """
    import os, signal, sys, time
    path = os.environ["GRADSCOPE_EXIT_FILE"]
    def stopped(signum, frame):
        open(path, "w").write("143")
        sys.exit(1)
    signal.signal(signal.SIGTERM, stopped)
    print(os.getsid(0) == os.getpid(), flush=True)
    if sys.argv[1] == "wait":
        time.sleep(30)
    if sys.argv[1] == "findings":
        open(path, "w").write("1")
    sys.exit(1)
    """
)


@pytest.fixture
def fake_torchrun(monkeypatch, tmp_path):
    """torchrun replaced by a Python program: it writes rank 0's code as a rank would."""
    script = tmp_path / "fake_torchrun.py"
    script.write_text(_FAKE_TORCHRUN)
    monkeypatch.setattr(
        launch, "torchrun_command", lambda nproc, args: [sys.executable, str(script), *args]
    )


def test_relaunch_passes_rank_0s_code_through_torchruns_1(fake_torchrun, capfd):
    assert launch.relaunch(2, ["findings"]) == 1
    assert launch.relaunch(2, ["crash"]) == 2  # torchrun's 1 with no code from rank 0
    assert capfd.readouterr().out.split() == ["True", "True"]  # a session of its own


def test_relaunch_forwards_sigterm_once_and_exits_143(fake_torchrun):
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    start = time.monotonic()
    try:
        assert launch.relaunch(2, ["wait"]) == 143
    finally:
        timer.cancel()
    assert time.monotonic() - start < 20  # the child stopped on the forwarded signal
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back


# SIGTERM after the script, ranks that vanished ---------------------------------------------


def test_term_note_raises_before_the_script_ended_notes_after_and_puts_the_handler_back():
    before = signal.getsignal(signal.SIGTERM)
    note = TermNote().install()
    try:
        with pytest.raises(Terminated):  # the script is not over: it must stop
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        note.settle()
        note.received = False
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert note.received  # and this process is still here
    finally:
        note.remove()
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_rank_whose_process_is_gone_without_a_word_has_vanished():
    store = _Store()
    peers.announce(store, 0)
    peers.announce(store, 1)
    dead = _dead_pid()
    store.set("gradscope/peer/1", f'{{"host": "{socket.gethostname()}", "pid": {dead}}}')
    store.set("gradscope/peer/2", f'{{"host": "{socket.gethostname()}", "pid": {os.getpid()}}}')
    store.set("gradscope/peer/3", f'{{"host": "elsewhere", "pid": {dead}}}')
    store.set("gradscope/peer/4", f'{{"host": "{socket.gethostname()}", "pid": {dead}}}')
    peers.farewell(store, 4, 0)  # ended normally before rank 0 looked
    assert peers.vanished(store, 6, 0) == (1,)  # 2 alive, 3 not ours to see, 5 never said
    assert peers.vanished(None, 2, 0) == ()


def test_rank_0_does_not_wait_for_the_record_of_a_rank_that_vanished():
    store = _Store()
    store.set("gradscope/peer/1", f'{{"host": "{socket.gethostname()}", "pid": {_dead_pid()}}}')
    start = time.monotonic()
    findings, notes = distributed_hooks.CrashMeeting(store, 0, 2).collect(wait_s=5.0)
    assert time.monotonic() - start < 2.0
    assert findings == [] and notes == (f"rank 1 died: {peers.VANISHED}",)


def _terminated_report():
    from gradscope.watcher.session import Watcher

    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    watcher = Watcher(label="t")
    with pytest.raises(Terminated), watcher:
        for _ in range(3):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            opt.step()
            opt.zero_grad()
        raise Terminated()
    assert watcher.report is not None and watcher.report.run.status == "terminated"
    return watcher.report, watcher.settings


def _rank_of_two(monkeypatch, rank: int) -> tuple[DistributedWatch, _Store]:
    """The watch of `rank` in a gloo group of two, its store a stand-in."""
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")
    hooks = DistributedWatch(enabled=True)
    store = _Store()
    assert hooks.session is not None
    hooks.session.group = SimpleNamespace(rank=rank, store=store, backend="gloo")
    return hooks, store


@pytest.fixture
def rank0_of_two(monkeypatch):
    hooks, store = _rank_of_two(monkeypatch, 0)
    hooks.error = Terminated()
    yield hooks, store
    hooks.close()
    distributed_hooks.rank_exit_code(143)  # the SIGTERM handler goes back


def test_terminated_rank_0_names_the_rank_that_failed_and_the_run_is_crashed(rank0_of_two):
    hooks, store = rank0_of_two
    store.set("gradscope/died/1", '{"failure": "t.py:3: the script raised ValueError: x"}')
    report, settings = _terminated_report()
    out = hooks.conclude(report, settings)
    assert out.run.status == "crashed" and exit_code([out.outcome()], None) == 2 and out.partial
    assert out.run.error == "the script died on rank 1: t.py:3: the script raised ValueError: x"
    assert any(
        n.startswith("torchrun stopped rank 0 (SIGTERM) after rank 1") for n in out.run.notes
    )
    assert len(out.run.steps) == 3


def test_terminated_rank_0_names_a_vanished_rank(rank0_of_two):
    hooks, store = rank0_of_two
    store.set("gradscope/peer/1", f'{{"host": "{socket.gethostname()}", "pid": {_dead_pid()}}}')
    report, settings = _terminated_report()
    out = hooks.conclude(report, settings)
    assert out.run.status == "crashed"
    assert out.run.error == f"the script died on rank 1: {peers.VANISHED}"


def test_terminated_rank_0_with_no_rank_to_blame_stays_terminated(rank0_of_two):
    hooks, store = rank0_of_two
    store.set("gradscope/peer/1", f'{{"host": "{socket.gethostname()}", "pid": {os.getpid()}}}')
    report, settings = _terminated_report()
    start = time.monotonic()
    out = hooks.conclude(report, settings)
    assert time.monotonic() - start < 3 * distributed_hooks.TERM_WAIT_S
    assert out.run.status == "terminated" and exit_code([out.outcome()], None) == 143


def test_a_terminated_rank_leaves_no_crash_record_and_says_goodbye(monkeypatch):
    hooks, store = _rank_of_two(monkeypatch, 1)
    assert hooks.session is not None
    hooks.error = Terminated()
    report, settings = _terminated_report()
    assert hooks.conclude(report, settings).run.status == "terminated"
    assert distributed_hooks.rank_exit_code(143) == 143
    assert not [k for k in store.keys if k.startswith("gradscope/died/")]  # no culprit
    assert store.keys["gradscope/peer/bye/1"] == "143"


# the hang block: the steps a rank took ------------------------------------------------------


def test_the_hang_block_counts_the_watchers_steps_without_ddp(monkeypatch):
    """No DDP model: the Session saw no step; the watcher counted every one."""
    from gradscope.distributed.watchdog import _steps

    monkeypatch.setenv("WORLD_SIZE", "2")
    hooks = DistributedWatch(enabled=True)
    try:
        assert hooks.session is not None
        watcher = SimpleNamespace(
            recorder=SimpleNamespace(finalisers=[], on_add=[], flush=lambda: None),
            state=SimpleNamespace(steps=10),
        )
        hooks.bind(watcher)
        assert hooks.session.steps == 0
        assert hooks.session.optimizer_steps() == 10 == _steps(hooks.session)
        watcher.state.steps = 11
        assert _steps(hooks.session) == 11
    finally:
        hooks.close()
        distributed_hooks.rank_exit_code(0)
    assert _steps(SimpleNamespace(steps=4)) == 4  # a session without the watcher's count


# a rank waiting on its own child process ------------------------------------------------------


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "def " not in line)


_BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"
_SLEEP = "import time\ntime.sleep({s})\n"


def evaluate(code: str) -> None:
    subprocess.run([sys.executable, "-c", code])


def _waiting_on(code: str) -> tuple[threading.Thread, Watchdog]:
    """A thread that runs `python -c code` and waits for it, and a watchdog over it
    (`_ended` ends the child once the test has seen it: the busy one no longer computes
    past the samples, the sleeping one no longer sleeps)."""
    thread = threading.Thread(target=evaluate, args=(code,), daemon=True)
    thread.start()
    session = SimpleNamespace(forwards=0, steps=0, rank=SimpleNamespace(rank=0, store=None))
    dog = Watchdog(session, 5.0, thread=thread)
    end = time.monotonic() + 10
    while time.monotonic() < end and not dog.sample().children:
        time.sleep(0.05)
    return thread, dog


def _ended(thread: threading.Thread, dog: Watchdog, code: str) -> None:
    """Kill the child the thread waits on (`python -c code`), then join the thread."""
    for pid in dog.sample().children:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if argv[1:3] == [b"-c", code.encode()]:
                os.kill(pid, signal.SIGKILL)
    thread.join()


def _moved_over(dog: Watchdog, seconds: float) -> tuple[bool, object]:
    time.sleep(0.3)  # the interpreter's start is over
    before = dog.sample()
    time.sleep(seconds)
    after = dog.sample()
    return moved(before, after, seconds), after


def test_a_thread_waiting_on_a_busy_child_moves():
    code = _BUSY.format(s=30)
    thread, dog = _waiting_on(code)
    try:
        did, after = _moved_over(dog, 1.0)
    finally:
        _ended(thread, dog, code)
    assert after.child_wait and after.children
    assert did


def test_a_thread_waiting_on_a_sleeping_child_is_still_and_names_it():
    code = _SLEEP.format(s=30)
    thread, dog = _waiting_on(code)
    try:
        did, after = _moved_over(dog, 1.0)
        state = dog.state(6.0)
    finally:
        _ended(thread, dog, code)
    assert after.child_wait and not did
    # other children of the test process (multiprocessing's resource tracker) may exist:
    # the one named first is the newest, the one the thread waits on
    named = state.child.split(" and ")[0]
    assert named.endswith(f" ({sys.executable} -c import time time.sleep(30))")
    assert int(named.split(" ")[0]) in after.children
    assert state.call == "run" and state.where.endswith(":" + str(_line_of("subprocess.run(")))
    assert state.stuck
    assert not dog.sample().child_wait and dog.state(0.0).child == ""


def test_the_block_says_a_rank_waits_on_its_child_not_a_collective():
    child = "4242 (python eval.py)"
    states = {
        0: RankState(0, 4, 3, 6.0, True, "train.py:9", "run(cmd)", "run", child=child),
        1: RankState(1, 4, 3, 6.0, True, "train.py:12", "dist.barrier()", "barrier"),
    }
    lines = summary(states, 2, 5.0)
    assert lines[1] == (
        "  rank 0: 3 optimizer steps, waiting for its child process 4242 (python eval.py) "
        "in run at train.py:9: run(cmd)"
    )
    assert lines[3] == (
        "rank 0 waits for a child process of its own, not in a collective: the child used "
        "no CPU and did no I/O for 5 s, and rank 1 waits for rank 0; the processes the "
        "ranks started are stopped too"
    )
    assert not any("never completes" in ln for ln in lines)


_ENDER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from gradscope.distributed import proctree
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # a grandchild that left its parent (reparented to init) but stays in the group
    subprocess.run(["sh", "-c", "sleep 60 & echo $!"], stdout=open("grandchild", "w"))
    time.sleep(0.3)
    print(child.pid, open("grandchild").read().strip(), flush=True)
    proctree.end()
    child.wait()
    """
)


def test_end_stops_the_children_and_the_group_members_a_rank_started(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", _ENDER],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
        start_new_session=True,  # a group leader, as torchrun starts each rank
    )
    assert proc.returncode == 0, proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2
    time.sleep(0.2)
    assert not [p for p in pids if proctree.read(p) and proctree.read(p).state not in "ZX"]


_LAUNCHER = textwrap.dedent(
    """
    import sys
    from gradscope.distributed import launch
    child = [sys.executable, "-c", sys.argv[1]]
    launch.torchrun_command = lambda nproc, args: child
    launch.relaunch(2, [])
    """
)
_ORPHAN = textwrap.dedent(
    """
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, lambda *a: (open("stopped", "w").write("1"), sys.exit(0)))
    open("started", "w").write(str(os.getpid()))
    time.sleep(30)
    """
)


def test_a_killed_launcher_leaves_no_torchrun_behind(tmp_path):
    launcher = subprocess.Popen([sys.executable, "-c", _LAUNCHER, _ORPHAN], cwd=tmp_path)
    try:
        end = time.monotonic() + 20
        while not (tmp_path / "started").exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert (tmp_path / "started").exists()
        launcher.kill()  # SIGKILL: no handler of the launcher runs
        launcher.wait()
        end = time.monotonic() + 5
        while not (tmp_path / "stopped").exists() and time.monotonic() < end:
            time.sleep(0.05)
        assert (tmp_path / "stopped").exists()  # the kernel sent it SIGTERM
    finally:
        if launcher.poll() is None:
            launcher.kill()
        if (tmp_path / "started").exists():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((tmp_path / "started").read_text()), signal.SIGKILL)


def test_a_rank_that_dies_in_a_group_without_ddp_hands_over_at_once(monkeypatch):
    """Rank 1 of ranks that all-reduce by hand (no DDP model): its crash record is left
    for rank 0 and it goes, never waiting for other ranks' records as rank 0 does (rank 0
    is in a collective with it: it wakes only when this rank's process ends)."""
    hooks, store = _rank_of_two(monkeypatch, 1)
    assert hooks.session is not None
    assert not hooks.session.is_main
    hooks.error = RuntimeError("rank 1 lost its data shard")
    report, settings = _terminated_report()
    start = time.monotonic()
    hooks.conclude(report, settings)
    assert time.monotonic() - start < crash_meeting.PEER_WAIT_S / 2
    assert "gradscope/died/1" in store.keys
    assert distributed_hooks.rank_exit_code(2) == 0  # rank 0 reports it
