"""The way into every hook: whether anything is to be recorded, and what a failure of
gradscope's own does. It never reaches the training, in any thread: the watch is
switched off (every hook only calls what it wraps from then on), the failure is kept
as a `Fault` for the report (an internal-error note, exit 3) and the script runs on as
it would without gradscope. Only --steps reached (`StopWatching`) and a rank's timeout
(faults.PASSING) end the run from a hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gradscope.watcher.faults import passing
from gradscope.watcher.state import StopWatching, WatchState
from gradscope.watcher.threads import ThreadState

T = TypeVar("T")


def enter(state: WatchState) -> ThreadState | None:
    """This thread's state; None when nothing is to be recorded. Once --steps is
    reached, the watching thread stops here at its next hook."""
    if state.off:
        return None
    if state.stopped:
        if state.threads.here().home:
            raise StopWatching()
        return None
    return state.threads.here()


def safely(state: WatchState, here: ThreadState, part: str, work: Callable[[], T]) -> T | None:
    """Run gradscope's part of a hook (`part`: which, for the report) under the shared
    lock. A failure switches the watch off (`fail`) and returns None. --steps reached
    stops the watching thread here, and no other."""
    with state.threads.lock:
        if state.off:
            return None
        try:
            out = work()
        except Exception as exc:
            if passing(exc):
                raise
            state.failed(part, exc, None if here.home else here.name)
            return None
    if state.stopped and here.home:
        raise StopWatching()
    return out


def shielded(state: WatchState, part: str, work: Callable[[], None]) -> None:
    """gradscope's work outside any hook of the script's thread (a hook of the
    Session, a read-back before the process group goes): a failure switches the
    watch off, as in `safely`."""
    try:
        work()
    except Exception as exc:
        if passing(exc):
            raise
        state.failed(part, exc)
