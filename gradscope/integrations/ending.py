"""The end of a watch for a host with no exception hook (HF Trainer, an accelerate loop):
`with callback:` around the training ends it with the exception; a watch nothing ended
(an uncaught exception, Ctrl-C) ends at the process's exit, its partial report written.
No torch."""

from __future__ import annotations

import atexit
import sys
from typing import Any


class Ending:
    """Mixed into a host's callback that holds `self.watch` (a core.HostWatch)."""

    watch: Any

    def begin(self) -> None:
        if not self.watch.active:
            self.watch.start()
            atexit.register(self._at_exit)

    def finish(self, exc: BaseException | None = None) -> Any:
        atexit.unregister(self._at_exit)
        return self.watch.end(exc)

    def _at_exit(self) -> None:
        if self.watch.active:  # the interpreter printed an uncaught exception: sys.last_value
            self.watch.end(getattr(sys, "last_value", None))

    @property
    def report(self) -> Any:
        """The finished report (None before the run ends)."""
        return self.watch.report

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self.watch.active:
            self.finish(exc)
