"""The watchdog that ends a distributed run no rank can finish.

A deadlock in the script's own collectives (a collective only some ranks issue, a
rank-local barrier) or a rank that stops answering leaves the other ranks blocked in a
native wait that gloo ends after 30 minutes. One daemon thread per rank watches, while
the script's process group exists, whether its run still moves. After `timeout_s`
without a move it writes where its main thread waits to the group's store (its own TCP
connection, which works while a collective blocks) and asks the other ranks for theirs.
When every rank that answers is stuck too, the lowest of them prints one block naming
every rank (a rank that never answers died or is stuck outside Python) and every rank
exits with code 2 (`os._exit`: the main thread is stuck in native code and cannot be
interrupted).

"Moves" means any of: the Session's forward or optimizer-step counts changed (the steps
as the watcher counts them, DDP or not), the main thread's Python stack changed, or the
main thread used CPU time, did I/O or woke up (Linux). So a long evaluation, data loading
or checkpoint write is never a hang; a thread blocked in a collective does none of these.
While the main thread waits for a child process of its own (`subprocess.run`,
`os.system`), the work of that child and its descendants counts too (CPU time, I/O, a
process started or ended: gradscope.distributed.proctree); a child that does none of it
for the whole limit is stuck as a blocked thread is, and the block names it. When the
watchdog ends the run, the processes the rank started end with it. The thread reads
these every `POLL_S`; the step path pays nothing.

What a move is: hang_progress; what a stuck run says: hang_block.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from gradscope.distributed import proctree
from gradscope.distributed.hang_block import EXIT_CODE, RankState, blocked_at, summary
from gradscope.distributed.hang_progress import Clock, Sample, proc_counters
from gradscope.distributed.launch import record_exit

# torch and gradscope.distributed (which loads it) are imported in functions:
# `gradscope --help` must not load them

POLL_S = 1.0
"""How often the watchdog looks at the run (and, after discovery, at the store)."""


def env_seconds(name: str, default: float) -> float:
    """Seconds from environment variable `name`; `default` when unset, not a number or
    negative."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


ANSWER_WAIT_S = env_seconds("GRADSCOPE_HANG_ANSWER_WAIT", 5.0)
"""How long a stuck rank waits for the other ranks' answers before it names the silent ones
($GRADSCOPE_HANG_ANSWER_WAIT, read at import: the tests of a silent rank set it lower)."""
DONE_WAIT_S = 5.0
"""How long the ranks wait for each other to print or mute themselves before they exit."""

KEY = "gradscope/stall"
_WORKING = (False, "", "")


def verdict(states: dict[int, RankState], world: int, waited_s: float) -> bool:
    """Is the run hung? Every answer says stuck, and every rank answered or the wait is over."""
    if any(not s.stuck for s in states.values()):
        return False  # a rank still works: the others wait for it, not for nothing
    return len(states) == world or waited_s >= ANSWER_WAIT_S


class Heard:
    """Which working ranks still answer: a working rank rewrites its entry every poll, and
    one whose entry stopped changing for ANSWER_WAIT_S is silent (it died since)."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[int, float]] = {}

    def live(self, states: dict[int, RankState], now: float) -> dict[int, RankState]:
        out = {}
        for r, state in states.items():
            beat, since = self.seen.get(r, (state.beat, now))
            if beat != state.beat:
                since = now
            self.seen[r] = (state.beat, since)
            if state.stuck or now - since < ANSWER_WAIT_S:
                out[r] = state
        return out


def printer(states: dict[int, RankState]) -> int:
    """The rank that prints the block: the lowest that answered."""
    return min(states)


class Watchdog:
    """The daemon thread of one rank; `start()` before the script, `stop()` after it."""

    def __init__(
        self,
        session: Any,
        timeout_s: float,
        thread: threading.Thread | None = None,
        on_exit: Callable[[int], None] = os._exit,
        poll_s: float = POLL_S,
        group_alive: Callable[[], bool] | None = None,
        silence: Callable[[], None] | None = None,
        end_children: Callable[[], object] | None = None,
    ):
        """`session`: a gradscope.distributed Session (its `rank` appears at discovery);
        `thread`: the one running the script (default: the calling thread);
        `group_alive`: whether the script's process group still exists; `silence`: after
        the verdict, mute the process (default: its stdout and stderr go to devnull);
        `end_children`: before exiting, end the processes the rank started."""
        self.session = session
        self.timeout_s = timeout_s
        self.watched = thread or threading.current_thread()
        self.on_exit = on_exit
        self.poll_s = poll_s
        self.group_alive = group_alive or _group_alive
        self.silence = silence or _silence_process
        self.end_children: Callable[[], object] = end_children or proctree.end
        self.own_rank: Any = None
        self.stop_event = threading.Event()
        self.fired: list[str] | None = None
        """The block this rank printed (None: it printed nothing)."""
        self._thread = threading.Thread(target=self._loop, name="gradscope-watchdog", daemon=True)

    def start(self) -> Watchdog:
        # imported here, so that the thread is never the first to import torch.distributed:
        # its native init racing an import on the main thread aborted the process
        from gradscope.distributed import context  # noqa: F401

        self._thread.start()
        return self

    def stop(self) -> None:
        """The script ended: say so to ranks that may wait for this one, and stop."""
        self.stop_event.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * self.poll_s)
        rank = self.session.rank or self.own_rank
        if rank is not None:
            ended = replace(
                self.state(0.0), stuck=True, ended=True, where="", line="", call="", child=""
            )
            _set(rank.store, f"{KEY}/rank/{rank.rank}", ended.to_json())

    # what the thread sees ----------------------------------------------------

    def sample(self) -> Sample:
        frame = sys._current_frames().get(self.watched.ident or -1)
        stack = []
        while frame is not None:
            stack.append((id(frame.f_code), frame.f_lasti))
            frame = frame.f_back
        cpu, io, wakeups = proc_counters(self.watched.native_id)
        counts = (int(self.session.forwards), _steps(self.session))
        sample = Sample(counts, tuple(stack), cpu, io, wakeups)
        if not self._waits_on_child():
            return sample
        procs = proctree.tree()
        ios = [p.io_bytes for p in procs]
        return replace(
            sample,
            child_wait=True,
            children=tuple(p.pid for p in procs),
            child_cpu_s=sum(p.cpu_s for p in procs),
            child_io=None if None in ios else sum(i for i in ios if i is not None),
        )

    def _waits_on_child(self) -> bool:
        """Is the main thread waiting for a process it started (in subprocess's wait or
        communicate, or blocked in wait4 as os.system is)?"""
        frame = sys._current_frames().get(self.watched.ident or -1)
        while frame is not None:
            if frame.f_code.co_filename == subprocess.__file__:
                return True
            frame = frame.f_back
        return proctree.waits_in_wait(self.watched.native_id)

    def _child(self) -> str:
        """`PID (command)` of the child the main thread waits for ('' when none)."""
        if not self._waits_on_child():
            return ""
        me = os.getpid()
        procs = proctree.tree()
        direct = [p for p in procs if p.ppid == me] or list(procs)
        if not direct:
            return ""
        # the newest: what a subprocess.run just started (not a long-lived helper such as
        # multiprocessing's resource tracker, also a child)
        direct.sort(key=lambda p: (-p.started, -p.pid))
        text = f"{direct[0].pid} ({direct[0].cmd})"
        return text + (f" and {len(direct) - 1} more" if len(direct) > 1 else "")

    def _rank(self) -> Any:
        """This process's Rank while the script's process group exists: the Session's once
        it found the model, before that (a hang before the first forward) the group's own."""
        if not self.group_alive():
            return None
        if self.session.rank is None and self.own_rank is None:
            from gradscope.distributed import context

            self.own_rank = context.current(self.timeout_s)
        return self.session.rank or self.own_rank

    def state(self, idle_s: float, beat: int = 0) -> RankState:
        rank = self.session.rank or self.own_rank
        where, line, call = blocked_at(sys._current_frames().get(self.watched.ident or -1))
        return RankState(
            rank=rank.rank,
            forwards=int(self.session.forwards),
            steps=_steps(self.session),
            idle_s=round(idle_s, 1),
            stuck=idle_s >= self.timeout_s,
            where=where,
            line=line,
            call=call,
            beat=beat,
            child=self._child(),
        )

    # the loop ----------------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._watch()
        except Exception:  # a watchdog must never take the run down by itself
            return

    def _watch(self) -> None:
        clock = Clock(self.sample(), time.monotonic())
        heard = Heard()
        written: tuple[bool, str, str] | None = None
        beat = 0
        stuck_since: float | None = None
        while not self.stop_event.wait(self.poll_s):
            now = time.monotonic()
            idle = clock.feed(self.sample(), now)
            rank = self._rank()
            if rank is None:  # no process group of several ranks: no collective to hang in
                clock.since = now
                continue
            stuck = idle >= self.timeout_s
            stuck_since = (stuck_since or now) if stuck else None
            if not stuck and not (written or _check(rank.store, f"{KEY}/open")):
                continue  # nobody asked: the usual case, one store look per poll
            beat += not stuck
            state = self.state(idle, beat)
            # a working rank answers every poll (its beat shows it is alive); a stuck one
            # once, and again only when it waits elsewhere
            mark = (True, state.call, state.where) if stuck else None
            if mark is None or mark != written:
                if stuck:
                    _set(rank.store, f"{KEY}/open", "1")
                _set(rank.store, f"{KEY}/rank/{rank.rank}", state.to_json())
            written = mark or _WORKING
            if stuck_since is None:
                continue
            states = heard.live(_answers(rank.store, rank.world), now)
            states[rank.rank] = state
            if verdict(states, rank.world, now - stuck_since):
                self._conclude(states, rank)
                return

    def _conclude(self, states: dict[int, RankState], rank: Any) -> None:
        """Print (the lowest rank that answered) or wait for the one that prints, then exit.

        Every rank mutes itself before any exits: as soon as one exits, its gloo
        connections close and the others' main threads wake up with "Connection closed by
        peer"; the block must be the last thing any rank says. So the printer exits only
        once the others said they are muted, and they only once it printed (both bounded).
        """
        if self.stop_event.is_set():  # the script ended meanwhile: nothing is stuck
            return
        if printer(states) == rank.rank:
            self.fired = summary(states, rank.world, self.timeout_s)
            _say(self.fired)
            self.silence()
            if rank.rank == 0:
                record_exit(int(EXIT_CODE))
            _set(rank.store, f"{KEY}/done", "1")
            others = [r for r, s in states.items() if r != rank.rank and not s.ended]
            _wait_for(rank.store, [f"{KEY}/muted/{r}" for r in others])
        else:
            self.silence()
            _set(rank.store, f"{KEY}/muted/{rank.rank}", "1")
            _wait_for(rank.store, [f"{KEY}/done"])
        self.end_children()
        self.on_exit(int(EXIT_CODE))


def _steps(session: Any) -> int:
    """The optimizer steps the rank took: the watcher's count where the Session has one."""
    count = getattr(session, "optimizer_steps", None)
    return int(count() if callable(count) else session.steps)


def _group_alive() -> bool:
    import torch.distributed as dist

    return bool(dist.is_available() and dist.is_initialized())


def _check(store: Any, key: str) -> bool:
    if store is None:
        return False
    try:
        return bool(store.check([key]))
    except RuntimeError:
        return False


def _wait_for(store: Any, keys: list[str]) -> None:
    """Until every key is in the store, at most DONE_WAIT_S."""
    end = time.monotonic() + DONE_WAIT_S
    while keys and time.monotonic() < end and not all(_check(store, k) for k in keys):
        time.sleep(0.05)


def _set(store: Any, key: str, value: str) -> None:
    if store is None:
        return
    try:
        store.set(key, value)
    except RuntimeError:
        pass


def _answers(store: Any, world: int) -> dict[int, RankState]:
    """The entries the ranks wrote so far (a rank without one is absent)."""
    out: dict[int, RankState] = {}
    for r in range(world):
        key = f"{KEY}/rank/{r}"
        if not _check(store, key):
            continue
        try:
            out[r] = RankState.from_json(store.get(key))
        except (RuntimeError, ValueError, TypeError):
            continue
    return out


def _say(lines: list[str]) -> None:
    err = sys.__stderr__ or sys.stderr
    err.write("".join(f"gradscope: {line}\n" for line in lines))
    _flush()


def _silence_process() -> None:
    """Nothing this process writes any more (Python or native code) reaches the terminal."""
    _flush()
    try:
        sink = os.open(os.devnull, os.O_WRONLY)
        os.dup2(sink, 1)
        os.dup2(sink, 2)
        os.close(sink)
    except OSError:
        pass


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


@contextlib.contextmanager
def watching(session: Any, timeout_s: float | None = None) -> Iterator[Watchdog | None]:
    """A watchdog over the script the block runs, stopped when it ends in any way.

    Nothing for a one-process run (`session` None) or `timeout_s` 0 (off); `timeout_s`
    None: the Session's own limit (GRADSCOPE_DIST_TIMEOUT, default 300 s).
    """
    limit = 0.0
    if session is not None:
        limit = float(session.timeout_s if timeout_s is None else timeout_s)
    if limit <= 0:
        yield None
        return
    dog = Watchdog(session, limit).start()
    try:
        yield dog
    finally:
        dog.stop()
