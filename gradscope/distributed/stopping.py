"""SIGTERM after the script, under torchrun: noted, never fatal, so rank 0 can report.

torchrun stops every rank with SIGTERM as soon as one fails, and SIGKILLs the ranks
still there 30 s later. While the script runs, SIGTERM raises `Terminated` in it
(gradscope.errors.sigterm_raises) and the run is reported as stopped; but rank 0 often
gets the signal just after its script failed (its collective broke when the other rank
died), while it collects the other ranks' errors and writes the report. Default
handling would end it there and lose the whole report. `TermNote` holds SIGTERM from
the watch's start to its exit code: until the script has ended (`settle()`) it raises
`Terminated` as the script section's own handler does, after that it only notes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any

from gradscope.errors import Terminated


class TermNote:
    """A SIGTERM handler that raises `Terminated` until `settle()`, then notes the signal;
    `remove()` puts the previous one back."""

    def __init__(self) -> None:
        self.received = False
        self.settled = False
        """The script has ended: a SIGTERM is noted, no longer raised."""
        self._previous: Any = None
        self._installed = False

    def install(self) -> TermNote:
        """Only in the main thread (the only one a handler can be set in)."""
        if threading.current_thread() is threading.main_thread():
            with contextlib.suppress(OSError, ValueError):
                self._previous = signal.signal(signal.SIGTERM, self._note)
                self._installed = True
        return self

    def _note(self, _signum: int, _frame: object) -> None:
        self.received = True
        if not self.settled:
            raise Terminated()

    def settle(self) -> None:
        """The script ended: from now on SIGTERM is noted only."""
        self.settled = True

    def remove(self) -> None:
        if not self._installed:
            return
        self._installed = False
        with contextlib.suppress(OSError, ValueError, TypeError):
            if signal.getsignal(signal.SIGTERM) == self._note:
                signal.signal(signal.SIGTERM, self._previous)
