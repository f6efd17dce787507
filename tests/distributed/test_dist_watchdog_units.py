"""The hang watchdog without torchrun: where a thread waits, when a run counts as stuck,
what it prints, and two watchdogs agreeing through a store (fake sessions, real threads)."""

from __future__ import annotations

import os
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from gradscope.distributed import watchdog
from gradscope.distributed.hang_block import RankState, blocked_at, summary
from gradscope.distributed.hang_progress import Clock, Sample, moved
from gradscope.distributed.watchdog import ANSWER_WAIT_S, Heard, Watchdog, env_seconds, verdict
from gradscope.errors import short_path

HERE = short_path(__file__)

# Stand-ins for torch's frames: code compiled under torch's file names, so the frames
# look like torch's own to the stack reader (library files, torch/distributed/ paths).
TORCH = os.path.join("site-packages", "torch")
_C10D = """
def all_reduce(ev):
    ev.wait()
"""
_LOGGER = """
def wrapper(fn, *args):
    return fn(*args)
"""
_MODULE = """
def _call_impl(m, *args):
    return m.forward(*args)

def _wrapped_call_impl(m, *args):
    return _call_impl(m, *args)
"""
_DDP = """
class DistributedDataParallel:
    def forward(self, ev):
        return self._pre_forward(ev)

    def _pre_forward(self, ev):
        ev.wait()
"""


def _load(source: str, *parts: str) -> dict:
    ns: dict = {}
    exec(compile(source, os.path.join("/venv", TORCH, *parts), "exec"), ns)
    return ns


C10D = _load(_C10D, "distributed", "distributed_c10d.py")
LOGGER = _load(_LOGGER, "distributed", "c10d_logger.py")
MODULE = _load(_MODULE, "nn", "modules", "module.py")
DDP = _load(_DDP, "nn", "parallel", "distributed.py")


def user_all_reduce(ev):
    LOGGER["wrapper"](C10D["all_reduce"], ev)  # the user's collective


def user_forward(ev):
    MODULE["_wrapped_call_impl"](DDP["DistributedDataParallel"](), ev)  # model(x)


def blocked_thread(target):
    ev = threading.Event()
    t = threading.Thread(target=target, args=(ev,), daemon=True)
    t.start()
    time.sleep(0.1)
    return t, ev


def where_blocked(target):
    """blocked_at() of a thread stopped inside `target`."""
    t, ev = blocked_thread(target)
    try:
        return blocked_at(sys._current_frames()[t.ident])
    finally:
        ev.set()


def test_blocked_at_names_the_collective_and_the_users_line():
    where, line, call = where_blocked(user_all_reduce)
    assert call == "all_reduce"
    assert where.startswith(HERE + ":") and line.startswith("LOGGER[")
    assert where == f"{HERE}:{user_all_reduce.__code__.co_firstlineno + 1}"


def test_blocked_at_names_the_module_call_past_torchs_wrappers():
    where, line, call = where_blocked(user_forward)
    assert call.endswith("forward") and "_call_impl" not in call  # DDP's forward
    assert where == f"{HERE}:{user_forward.__code__.co_firstlineno + 1}"
    assert "model(x)" in line


def test_blocked_at_without_user_code_or_frames():
    assert blocked_at(None) == ("", "", "")
    ev = threading.Event()
    t = threading.Thread(target=ev.wait, daemon=True)  # the stdlib only
    t.start()
    time.sleep(0.05)
    where, line, call = blocked_at(sys._current_frames()[t.ident])
    ev.set()
    assert (where, line) == ("", "") and call.endswith("wait")


# when the run moved -----------------------------------------------------------


def s(counts=(0, 0), stack=((1, 2),), cpu=None, io=None, wakeups=None):
    return Sample(counts, stack, cpu, io, wakeups)


def test_moved_by_counts_stack_cpu_or_io_but_not_by_a_blocked_wait():
    assert not moved(s(), s(), 1.0)
    assert not moved(s(cpu=1.0, io=10), s(cpu=1.0, io=10), 1.0)  # blocked: no CPU, no I/O
    assert not moved(s(cpu=1.0), s(cpu=1.01), 1.0)  # a wake-up tick is not work
    assert moved(s((3, 2)), s((4, 2)), 1.0)  # a forward
    assert moved(s((3, 2)), s((3, 3)), 1.0)  # an optimizer step
    assert moved(s(stack=((1, 2),)), s(stack=((1, 4),)), 1.0)  # Python ran
    assert moved(s(cpu=1.0), s(cpu=1.5), 1.0)  # computing in native code
    assert moved(s(io=10), s(io=4096), 1.0)  # writing a checkpoint
    assert not moved(s(cpu=None), s(cpu=9.0), 1.0)  # unknown on one side: no evidence
    assert moved(s(wakeups=5), s(wakeups=6), 1.0)  # a wait with a timeout came back
    assert not moved(s(wakeups=5), s(wakeups=5), 1.0)


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux /proc")
def test_a_polling_wait_moves_a_blocked_wait_does_not():
    """What the thread reads from /proc: a loop waiting with a timeout (a DataLoader
    waiting for its workers) wakes up; a wait without one (a collective) does not."""
    import queue

    stop = threading.Event()

    def poll():
        q: queue.Queue = queue.Queue()
        while not stop.is_set():
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                pass

    def judge(target):
        t = threading.Thread(target=target, daemon=True)
        t.start()
        dog = Watchdog(SimpleNamespace(forwards=0, steps=0, rank=None), 5.0, thread=t)
        time.sleep(0.1)
        before = dog.sample()
        time.sleep(0.6)
        after = dog.sample()
        assert before.wakeups is not None and before.cpu_s is not None
        return moved(before, after, 0.6)

    try:
        assert judge(poll)
        assert not judge(stop.wait)
    finally:
        stop.set()


def test_a_slow_step_just_under_the_timeout_is_never_stuck_a_frozen_one_is():
    timeout = 5.0
    clock = Clock(s((0, 0)), 0.0)
    idle = []
    t, steps = 0.0, 0
    for _ in range(20):  # a step every 4.9 s, sampled every second
        for _ in range(5):
            t = round(t + 0.98, 2)
            steps += t >= 4.9 * (steps + 1)
            idle.append(clock.feed(s((steps, steps)), t))
    assert steps >= 19 and max(idle) < timeout
    frozen = [clock.feed(s((steps, steps)), t + k) for k in range(1, 8)]
    stuck_at = next(k for k, v in enumerate(frozen, 1) if v >= timeout)
    assert 5 <= stuck_at <= 6


# the verdict and the message ----------------------------------------------------


def state(rank, stuck=True, steps=3, call="all_reduce", where="train.py:44", beat=0):
    line = "dist.all_reduce(t)" if call == "all_reduce" else "out = model(x)"
    return RankState(rank, steps + 1, steps, 6.0 if stuck else 0.2, stuck, where, line, call, beat)


def test_verdict_waits_for_a_working_rank_and_for_silent_ones():
    assert verdict({0: state(0), 1: state(1)}, 2, 0.0)  # everyone answered, all stuck
    assert not verdict({0: state(0), 1: state(1, stuck=False)}, 2, 99.0)  # rank 1 works
    assert not verdict({0: state(0)}, 2, ANSWER_WAIT_S - 0.1)  # rank 1 may still answer
    assert verdict({0: state(0)}, 2, ANSWER_WAIT_S)  # it did not


def test_a_working_rank_that_stops_answering_becomes_silent():
    heard = Heard()
    working = state(1, stuck=False, beat=1)
    assert 1 in heard.live({1: working}, 0.0)
    assert 1 in heard.live({1: state(1, stuck=False, beat=2)}, 3.0)  # still beating
    assert 1 in heard.live({1: state(1, stuck=False, beat=2)}, 3.0 + ANSWER_WAIT_S - 0.1)
    assert 1 not in heard.live({1: state(1, stuck=False, beat=2)}, 3.0 + ANSWER_WAIT_S)
    assert 1 in heard.live({1: state(1, beat=2)}, 99.0)  # a stuck entry stays


def test_summary_names_every_rank_its_step_call_and_line():
    lines = summary(
        {0: state(0, call="DistributedDataParallel.forward", where="t.py:48"), 1: state(1)},
        2,
        5,
    )
    assert lines[0] == "the run is stuck: no rank made progress for 5 s"
    assert lines[1] == (
        "  rank 0: 3 optimizer steps, waiting in DistributedDataParallel.forward "
        "at t.py:48: out = model(x)"
    )
    assert lines[2] == (
        "  rank 1: 3 optimizer steps, waiting in all_reduce at train.py:44: dist.all_reduce(t)"
    )
    assert "different places" in lines[3]
    assert lines[-1].startswith("stopping every rank (exit 2)")


def test_summary_names_a_rank_whose_script_ended():
    ended = RankState(1, 7, 6, 0.0, True, "", "", "", ended=True)
    lines = summary({0: state(0), 1: ended}, 2, 5)
    assert lines[2] == "  rank 1: 6 optimizer steps, its script ended"
    assert lines[3] == "the others wait in a collective rank 1 never joined"


def test_summary_names_a_silent_rank():
    lines = summary({0: state(0, steps=1)}, 3, 2.5)
    assert "no rank made progress for 2.5 s" in lines[0]
    assert lines[1].startswith("  rank 0: 1 optimizer step, waiting in all_reduce")
    assert lines[2] == "  rank 1: no answer: it died or is stuck outside Python"
    assert lines[3] == "  rank 2: no answer: it died or is stuck outside Python"
    assert lines[4] == "the other ranks wait for rank 1, 2"


# two watchdogs and a store ------------------------------------------------------


class FakeStore:
    """The three calls the watchdog makes on torch's TCPStore."""

    def __init__(self):
        self.data: dict[str, bytes] = {}
        self.lock = threading.Lock()

    def set(self, key, value):
        with self.lock:
            self.data[key] = value.encode()

    def get(self, key):
        with self.lock:
            return self.data[key]

    def check(self, keys):
        with self.lock:
            return all(k in self.data for k in keys)


class Rank:
    def __init__(self, rank, world, store):
        self.rank, self.world, self.store = rank, world, store


def fake_run(world, store, timeout=0.4):
    """`world` ranks, each a thread blocked on an Event (its "collective"), a fake Session
    and a watchdog that records its exit instead of exiting."""
    exits: dict[int, int] = {}
    ranks = []
    for r in range(world):
        t, ev = blocked_thread(user_all_reduce)
        session = SimpleNamespace(forwards=4, steps=3, rank=Rank(r, world, store))
        dog = Watchdog(
            session,
            timeout,
            thread=t,
            on_exit=lambda c, r=r: exits.setdefault(r, c),
            group_alive=lambda: True,
            silence=lambda: None,
        )
        dog.poll_s = 0.05
        ranks.append((session, ev, dog))
    return ranks, exits


def rank_0_alone_concludes(ranks, exits):
    """Start rank 0's watchdog only and wait until it exits; then release every rank."""
    ranks[0][2].start()
    try:
        assert wait_for(lambda: 0 in exits, 5.0)
    finally:
        ranks[0][2].stop()
        for _, ev, _ in ranks:
            ev.set()


@pytest.fixture
def short_waits(monkeypatch):
    monkeypatch.setattr(watchdog, "ANSWER_WAIT_S", 0.5)
    monkeypatch.setattr(watchdog, "DONE_WAIT_S", 0.5)


def wait_for(cond, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end and not cond():
        time.sleep(0.02)
    return cond()


def test_stuck_ranks_exit_2_and_the_lowest_prints_once(short_waits, capfd):
    store = FakeStore()
    ranks, exits = fake_run(2, store)
    for _, _, dog in ranks:
        dog.start()
    try:
        assert wait_for(lambda: len(exits) == 2, 5.0)
    finally:
        for _, ev, dog in ranks:
            dog.stop()
            ev.set()
    assert exits == {0: 2, 1: 2}
    assert ranks[0][2].fired is not None and ranks[1][2].fired is None
    assert store.check(["gradscope/stall/done", "gradscope/stall/muted/1"])  # the handshake
    err = capfd.readouterr().err
    assert err.count("the run is stuck") == 1
    assert f"rank 1: 3 optimizer steps, waiting in all_reduce at {HERE}:" in err


def test_a_silent_rank_is_named_after_the_answer_wait(short_waits, capfd):
    store = FakeStore()
    ranks, exits = fake_run(2, store)
    rank_0_alone_concludes(ranks, exits)  # rank 1's watchdog never runs: it died
    assert "rank 1: no answer" in capfd.readouterr().err


def test_a_rank_whose_script_ended_is_named_as_such(short_waits, capfd):
    ranks, exits = fake_run(2, FakeStore())
    ranks[1][2].stop()  # rank 1's script ended (never started watching)
    rank_0_alone_concludes(ranks, exits)
    err = capfd.readouterr().err
    assert "gradscope:   rank 1: 3 optimizer steps, its script ended\n" in err
    assert "the others wait in a collective rank 1 never joined" in err


def test_no_process_group_no_verdict(short_waits):
    ranks, exits = fake_run(2, FakeStore())
    for _, _, dog in ranks:
        dog.group_alive = lambda: False  # the script destroyed its group
        dog.start()
    time.sleep(1.0)
    for _, ev, dog in ranks:
        dog.stop()
        ev.set()
    assert exits == {}


def test_a_rank_still_working_holds_the_verdict_back(short_waits):
    ranks, exits = fake_run(2, FakeStore())
    busy = ranks[1][0]
    for _, _, dog in ranks:
        dog.start()
    try:
        end = time.monotonic() + 1.5  # rank 1 steps every 0.1 s: rank 0 waits for it
        while time.monotonic() < end:
            busy.steps += 1
            time.sleep(0.1)
        assert exits == {}
        assert wait_for(lambda: len(exits) == 2, 5.0)  # then it blocks too
    finally:
        for _, ev, dog in ranks:
            dog.stop()
            ev.set()


def test_a_healthy_run_with_steps_under_the_timeout_is_never_stopped(short_waits):
    ranks, exits = fake_run(2, FakeStore(), timeout=0.4)
    for _, _, dog in ranks:
        dog.start()
    end = time.monotonic() + 2.0
    while time.monotonic() < end:  # a step every 0.3 s on both ranks
        for session, _, _ in ranks:
            session.steps += 1
        time.sleep(0.3)
    for _, _, dog in ranks:
        dog.stop()  # the script ended: a slow report afterwards is no hang
    time.sleep(0.6)
    for _, ev, _ in ranks:
        ev.set()
    assert exits == {}
    assert all(dog.fired is None for _, _, dog in ranks)


def test_before_discovery_nothing_is_judged(short_waits):
    t, ev = blocked_thread(user_all_reduce)
    exits: list[int] = []
    session = SimpleNamespace(forwards=0, steps=0, rank=None)
    dog = Watchdog(
        session, 0.2, thread=t, on_exit=exits.append, group_alive=lambda: True, silence=lambda: None
    )
    dog.poll_s = 0.05
    dog.start()
    time.sleep(0.6)
    dog.stop()
    ev.set()
    assert exits == []


def test_a_single_process_run_installs_nothing():
    before = threading.active_count()
    with watchdog.watching(None, 5.0) as dog:
        assert dog is None and threading.active_count() == before
    session = SimpleNamespace(forwards=0, steps=0, rank=None, timeout_s=300.0)
    with watchdog.watching(session, 0) as dog:  # 0: off
        assert dog is None


def test_watching_uses_the_sessions_limit_and_stops_with_the_block():
    import torch.distributed  # noqa: F401  (imported before any script runs, as in watch)

    session = SimpleNamespace(forwards=0, steps=0, rank=None, timeout_s=123.0)
    with watchdog.watching(session) as dog:
        assert dog is not None and dog.timeout_s == 123.0
        assert any(t.name == "gradscope-watchdog" for t in threading.enumerate())
    assert dog.stop_event.is_set()
    assert wait_for(
        lambda: not any(t.name == "gradscope-watchdog" for t in threading.enumerate()), 3
    )


def test_run_script_without_torchrun_starts_no_watchdog(tmp_path, monkeypatch):
    from gradscope.watcher.runner import run_script

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    out = tmp_path / "threads.txt"
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, threading\n"
        "open(sys.argv[1], 'w').write(' '.join(t.name for t in threading.enumerate()))\n"
    )
    run_script(str(script), [str(out)], hang_timeout=1.0)
    assert "gradscope-watchdog" not in out.read_text()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(None, 5.0), ("1.5", 1.5), ("0", 0.0), ("soon", 5.0), ("-1", 5.0), ("nan", 5.0)],
)
def test_the_answer_wait_is_read_from_the_environment(monkeypatch, value, seconds):
    if value is None:
        monkeypatch.delenv("GRADSCOPE_HANG_ANSWER_WAIT", raising=False)
    else:
        monkeypatch.setenv("GRADSCOPE_HANG_ANSWER_WAIT", value)
    assert env_seconds("GRADSCOPE_HANG_ANSWER_WAIT", 5.0) == seconds
