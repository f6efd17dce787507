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
"""

from __future__ import annotations

import contextlib
import json
import linecache
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from types import FrameType
from typing import Any

from gradscope.distributed import proctree
from gradscope.errors import ExitCode, is_user_file, short_path

POLL_S = 1.0
"""How often the watchdog looks at the run (and, after discovery, at the store)."""
ANSWER_WAIT_S = 5.0
"""How long a stuck rank waits for the other ranks' answers before it names the silent ones."""
DONE_WAIT_S = 5.0
"""How long the ranks wait for each other to print or mute themselves before they exit."""
BUSY_CPU = 0.1
"""CPU seconds per second of the main thread that count as working (a blocked wait uses 0)."""
EXIT_CODE = ExitCode.ERROR
"""Like a timed-out gathering (RankTimedOut): the run could not finish, exit 2."""

KEY = "gradscope/stall"
_WORKING = (False, "", "")
_WRAPPERS = frozenset({"_wrapped_call_impl", "_call_impl", "wrapper", "_fn", "inner"})


@dataclass(frozen=True)
class Sample:
    """What the watchdog sees of its rank at one moment."""

    counts: tuple[int, ...]
    """The Session's forwards and optimizer steps."""
    stack: tuple[tuple[int, int], ...]
    """(code id, last instruction) of each frame of the main thread."""
    cpu_s: float | None = None
    """The main thread's CPU seconds (None where /proc is not there)."""
    io_bytes: int | None = None
    """Bytes the main thread read and wrote (None where /proc is not there)."""
    wakeups: int | None = None
    """The main thread's voluntary context switches: a Python loop that waits with a
    timeout (a DataLoader waiting for its workers) wakes up; a blocked collective never."""
    child_wait: bool = False
    """The main thread waits for a child process of its own (not in a collective)."""
    children: tuple[int, ...] = ()
    """While it does: the pids of this process's live descendants."""
    child_cpu_s: float | None = None
    """While it does: their CPU seconds, summed."""
    child_io: int | None = None
    """While it does: the bytes they read and wrote, summed (None where not readable)."""


def moved(before: Sample, after: Sample, seconds: float) -> bool:
    """Did the run do anything between two samples `seconds` apart?"""
    if before.counts != after.counts or before.stack != after.stack:
        return True
    if before.cpu_s is not None and after.cpu_s is not None:
        if after.cpu_s - before.cpu_s >= BUSY_CPU * max(seconds, 1e-9):
            return True
    if before.io_bytes is not None and after.io_bytes is not None:
        if after.io_bytes != before.io_bytes:
            return True
    if before.wakeups is not None and after.wakeups is not None:
        if after.wakeups != before.wakeups:
            return True
    return before.child_wait and after.child_wait and _child_worked(before, after, seconds)


def _child_worked(before: Sample, after: Sample, seconds: float) -> bool:
    """The children the main thread waits on worked: a process started or ended, CPU time
    (summed over them: a parallel build counts whole) or I/O. Their wake-ups do not count:
    an idle DataLoader worker wakes every few seconds."""
    if before.children != after.children:
        return True
    if before.child_cpu_s is not None and after.child_cpu_s is not None:
        if after.child_cpu_s - before.child_cpu_s >= BUSY_CPU * max(seconds, 1e-9):
            return True
    return before.child_io is not None and after.child_io not in (None, before.child_io)


class Clock:
    """Seconds since the run last moved, from samples fed in order."""

    def __init__(self, sample: Sample, now: float):
        self.last, self.at, self.since = sample, now, now

    def feed(self, sample: Sample, now: float) -> float:
        """The idle seconds after `sample` taken at `now`."""
        if moved(self.last, sample, now - self.at):
            self.since = now
        self.last, self.at = sample, now
        return now - self.since


@dataclass(frozen=True)
class RankState:
    """One rank's answer: how far it got and where its main thread is."""

    rank: int
    forwards: int
    steps: int
    idle_s: float
    stuck: bool
    where: str
    """The innermost line of the user's code, `file:line` ('' when none)."""
    line: str
    """That line's source text."""
    call: str
    """The library function it waits in (`all_reduce`, `barrier`, `Tensor.backward`...)."""
    beat: int = 0
    """Counts a working rank's answers, so a rank that stops answering is seen as silent."""
    ended: bool = False
    """Its script ended: it will join no collective any more (counts as stuck)."""
    child: str = ""
    """The child process its main thread waits for, `PID (command)` ('' when none)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> RankState:
        return cls(**json.loads(text))


def _name(frame: FrameType) -> str:
    return str(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))


def blocked_at(frame: FrameType | None) -> tuple[str, str, str]:
    """(file:line, source line, call) of a thread's stack, innermost `frame` first.

    file:line is the innermost frame of the user's own code; call is the library function
    that line waits in: the innermost public torch.distributed function (`all_reduce`,
    `barrier`), else the function the user's line called, past torch's call wrappers.
    """
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    user = next((i for i, f in enumerate(frames) if is_user_file(f.f_code.co_filename)), None)
    where = line = ""
    if user is not None:
        f = frames[user]
        where = f"{short_path(f.f_code.co_filename)}:{f.f_lineno}"
        line = linecache.getline(f.f_code.co_filename, f.f_lineno or 0).strip()
    inner = frames[:user] if user is not None else frames
    call = next((_name(f) for f in inner if _is_collective(f)), "")
    if not call:  # what the user's line called, or the innermost frame without one
        order = reversed(inner) if user is not None else iter(inner)
        call = next((_name(f) for f in order if f.f_code.co_name not in _WRAPPERS), "")
    return where, line, call


def _is_collective(frame: FrameType) -> bool:
    path = frame.f_code.co_filename.replace(os.sep, "/")
    name = frame.f_code.co_name
    return "torch/distributed/" in path and not name.startswith("_") and name not in _WRAPPERS


def describe(state: RankState) -> str:
    """`rank 1: 3 optimizer steps, waiting in all_reduce at train.py:44: dist.all_reduce(t)`."""
    text = f"rank {state.rank}: {state.steps} optimizer step{'s' * (state.steps != 1)}, "
    if state.ended:
        return text + "its script ended"
    text += "waiting" if state.stuck else f"busy (moved {state.idle_s:.0f} s ago)"
    if state.child:
        text += f" {'for' if state.stuck else 'with'} its child process {state.child}"
    if state.call:
        text += f" in {state.call}"
    if state.where:
        text += f" at {state.where}"
        if state.line:
            text += f": {state.line}"
    return text


def summary(states: dict[int, RankState], world: int, timeout_s: float) -> list[str]:
    """The block a stuck run prints: one line per rank, then what it means."""
    lines = [f"the run is stuck: no rank made progress for {timeout_s:g} s"]
    for r in range(world):
        state = states.get(r)
        if state is None:
            lines.append(f"  rank {r}: no answer: it died or is stuck outside Python")
        else:
            lines.append("  " + describe(state))
    silent = [r for r in range(world) if r not in states]
    places = {(s.call, s.where) for s in states.values()}
    steps = {s.steps for s in states.values()}
    ended = [r for r, s in sorted(states.items()) if s.ended]
    parents = [r for r, s in sorted(states.items()) if s.child and not s.ended]
    if silent:
        lines.append(f"the other ranks wait for rank {_ranks(silent)}")
    elif ended:
        lines.append(f"the others wait in a collective rank {_ranks(ended)} never joined")
    elif parents:
        others = [r for r in sorted(states) if r not in parents]
        lines.append(
            f"rank {_ranks(parents)} {'waits' if len(parents) == 1 else 'wait'} for a child "
            f"process of its own, not in a collective: the child used no CPU and did no I/O "
            f"for {timeout_s:g} s"
            + (
                f", and rank {_ranks(others)} {'waits' if len(others) == 1 else 'wait'} "
                f"for rank {_ranks(parents)}"
                if others
                else ""
            )
            + "; the processes the ranks started are stopped too"
        )
    elif len(places) > 1 or len(steps) > 1:
        lines.append(
            "the ranks wait in different places: a collective issued on some ranks only "
            "(or in a different order) never completes"
        )
    lines.append(f"stopping every rank (exit {int(EXIT_CODE)}); set the limit with --hang-timeout")
    return lines


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks))


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


def _proc_counters(tid: int | None) -> tuple[float | None, int | None, int | None]:
    """CPU seconds, bytes read and written, voluntary context switches of thread `tid`."""
    if tid is None:
        return None, None, None
    base = f"/proc/self/task/{tid}"
    cpu = io = wakeups = None
    try:
        with open(f"{base}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"{base}/io", encoding="ascii") as f:
            io = sum(int(v) for k, v in (ln.split(":") for ln in f) if k in ("rchar", "wchar"))
    except (OSError, ValueError):
        pass
    try:
        with open(f"{base}/status", encoding="ascii") as f:
            line = next(ln for ln in f if ln.startswith("voluntary_ctxt_switches:"))
        wakeups = int(line.split(":")[1])
    except (OSError, ValueError, StopIteration):
        pass
    return cpu, io, wakeups


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
        cpu, io, wakeups = _proc_counters(self.watched.native_id)
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
                from gradscope.distributed.launch import record_exit

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
