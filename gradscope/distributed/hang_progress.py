"""Whether a distributed run still moves, for the hang watchdog (gradscope.distributed.watchdog):
samples of its rank's main thread, and the seconds since the last one that moved."""

from __future__ import annotations

import os
from dataclasses import dataclass

BUSY_CPU = 0.1
"""CPU seconds per second of the main thread that count as working (a blocked wait uses 0)."""


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


def proc_counters(tid: int | None) -> tuple[float | None, int | None, int | None]:
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
