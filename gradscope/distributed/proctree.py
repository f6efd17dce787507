"""A rank's own child processes, read from /proc (Linux): what they do, how to end them.

A rank that waits on its own child (`subprocess.run` of an evaluation tool, `os.system`)
is not in a collective: the child's CPU time and I/O are the rank's progress
(gradscope.distributed.watchdog). When the watchdog ends a stuck run, the processes the
rank started go with it (`end`): its descendants, and every other process in its process
group when it leads one (torchrun starts each rank as a session leader), so a child that
detached from its parent is found too. Nothing here where /proc is absent.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

GRACE_S = 0.5
"""How long the processes get after SIGTERM before SIGKILL."""
CMD_CHARS = 120


@dataclass(frozen=True)
class Proc:
    """One process as /proc shows it."""

    pid: int
    ppid: int
    state: str
    """R running, S sleeping, D disk wait, Z zombie..."""
    cpu_s: float
    """User and system CPU seconds, its waited-for children's included."""
    io_bytes: int | None
    """Bytes read and written (None when not readable)."""
    cmd: str
    """Its command line, shortened."""
    started: int = 0
    """When it started, in clock ticks since boot (the newest child is the one a thread
    that just called subprocess.run waits for)."""


def waits_in_wait(tid: int | None) -> bool:
    """Is thread `tid` of this process blocked waiting for a child to end (wait4/waitid:
    subprocess's Popen.wait, os.system, os.waitpid)?"""
    if tid is None:
        return False
    try:
        with open(f"/proc/self/task/{tid}/wchan", encoding="ascii") as f:
            return f.read().strip() == "do_wait"
    except OSError:
        return False


def descendants(pid: int | None = None) -> list[int]:
    """The children of `pid` (default: this process), their children, and so on."""
    out: list[int] = []
    todo = [os.getpid() if pid is None else pid]
    while todo:
        parent = todo.pop()
        kids = _children(parent)
        out += kids
        todo += kids
    return out


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                kids += [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue
    return kids


def read(pid: int) -> Proc | None:
    """Process `pid`, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = sum(int(v) for v in fields[11:15])  # utime stime cutime cstime
        cpu = ticks / os.sysconf("SC_CLK_TCK")
        started = int(fields[19])  # starttime
    except (OSError, ValueError, IndexError):
        return None
    io = None
    try:
        with open(f"/proc/{pid}/io", encoding="ascii") as f:
            io = sum(int(v) for k, v in (ln.split(":") for ln in f) if k in ("rchar", "wchar"))
    except (OSError, ValueError):
        pass
    return Proc(pid, int(fields[1]), fields[0], cpu, io, _cmd(pid), started)


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return ""
    text = " ".join(p.decode("utf-8", "replace") for p in parts)
    text = " ".join(text.split())  # a `-c` program's newlines: one line
    return text if len(text) <= CMD_CHARS else text[: CMD_CHARS - 1] + "…"


def tree(pid: int | None = None) -> tuple[Proc, ...]:
    """Every live descendant of `pid` (default: this process)."""
    procs = (read(p) for p in descendants(pid))
    return tuple(p for p in procs if p is not None and p.state not in ("Z", "X"))


def group_members() -> list[int]:
    """The other processes of this process's group, when it leads one (else none: the
    group is then the shell's or the launcher's, not this rank's to end)."""
    me = os.getpid()
    if os.getpgrp() != me:
        return []
    out = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == me:
            continue
        try:
            if os.getpgid(pid) == me:
                out.append(pid)
        except OSError:
            continue
    return out


def end(grace_s: float = GRACE_S) -> list[int]:
    """End every process this one started (descendants, and its group's members):
    SIGTERM, then SIGKILL for those still there after `grace_s`. The pids signalled."""
    pids = list(dict.fromkeys(descendants() + group_members()))
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = pids
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if _running(p)]
    for pid in left:
        _signal(pid, signal.SIGKILL)
    return pids


def _running(pid: int) -> bool:
    proc = read(pid)
    return proc is not None and proc.state not in ("Z", "X")


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass
