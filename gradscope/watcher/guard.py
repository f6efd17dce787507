"""The way into every hook: whether anything is to be recorded, and what a failure of
gradscope's own does. A failure in the watching thread ends the run as the script's
would (a rank's timeout must); in another thread it only stops the recording, with a
note, since nothing of gradscope's may be raised in a thread the script does not watch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

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


def safely(state: WatchState, here: ThreadState, work: Callable[[], T]) -> T | None:
    """Run gradscope's part of a hook under the shared lock. In a thread other than
    the watching one nothing of gradscope's is raised: a failure stops the recording,
    with a note. --steps reached stops the watching thread here, and no other."""
    with state.threads.lock:
        if state.off:
            return None
        try:
            out = work()
        except Exception as exc:
            if here.home:
                raise
            state.off = True
            state.notes.append(
                f"recording stopped after step {state.steps}: gradscope failed in "
                f"thread {here.name!r}: {type(exc).__name__}: {exc}".rstrip(": ")
            )
            return None
    if state.stopped and here.home:
        raise StopWatching()
    return out
