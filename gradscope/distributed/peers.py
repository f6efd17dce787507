"""Which ranks are still there, asked without a collective (the others may be dead).

Each rank leaves its host and pid in the process group's store when gradscope first
sees the group (`announce`), and a word when its `gradscope watch` ends (`farewell`).
A rank on this host whose process is gone without that word and without a crash record
was killed (SIGKILL, the OOM killer) or died in native code: no Python error of its own
could be written. Rank 0 names such a rank when its own collective fails or torchrun
stops it. Ranks on other hosts cannot be looked at from here and are never named so.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

KEY = "gradscope/peer"
VANISHED = (
    "it ended without a Python error: killed by a signal (SIGKILL, the OOM killer) or "
    "a crash in native code"
)


def announce(store: Any, rank: int) -> None:
    """Leave this process's host and pid for the other ranks."""
    _set(store, f"{KEY}/{rank}", json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))


def farewell(store: Any, rank: int, code: int) -> None:
    """This rank's gradscope ends normally, with `code`: it did not vanish."""
    _set(store, f"{KEY}/bye/{rank}", str(int(code)))


def vanished(store: Any, world: int, me: int) -> tuple[int, ...]:
    """The other ranks on this host whose process is gone without a farewell."""
    if store is None:
        return ()
    host = socket.gethostname()
    out: list[int] = []
    for r in range(world):
        if r == me or not _check(store, f"{KEY}/{r}") or _check(store, f"{KEY}/bye/{r}"):
            continue
        try:
            where = json.loads(store.get(f"{KEY}/{r}"))
        except Exception:  # the store went away: nothing more to learn
            return tuple(out)
        if where.get("host") == host and not alive(int(where.get("pid", 0))):
            out.append(r)
    return tuple(out)


def alive(pid: int) -> bool:
    """Is process `pid` running (a zombie, dead but not yet reaped, is not)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _check(store: Any, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:
        return False


def _set(store: Any, key: str, value: str) -> None:
    if store is None:
        return
    try:
        store.set(key, value)
    except Exception:  # the store went with torchrun's agent: nobody left to tell
        pass
