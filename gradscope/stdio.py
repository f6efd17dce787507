"""The user's code prints; gradscope's report on stdout stays what it is.

Used wherever user code runs while a report may be headed for stdout (every command,
and `watch`'s whole run). No torch here.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def user_stdout_to_stderr(active: bool = True) -> Iterator[None]:
    """While the user's code runs, what it prints goes to stderr, so a report on stdout
    (JSON piped to jq, say) stays parseable. Python's sys.stdout and file descriptor 1
    both, so prints from extensions move too."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved_fd = None
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ else -1
        if fd >= 0 and sys.stdout is sys.__stdout__:
            saved_fd = os.dup(fd)
            os.dup2(sys.stderr.fileno(), fd)
    except (OSError, ValueError, AttributeError):  # no real descriptors (a test runner)
        saved_fd = None
    real = sys.stdout
    # its own stream over a copy of stderr's descriptor: a script that closes "its"
    # stdout closes that copy, not gradscope's stderr
    try:
        sys.stdout = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
        own = True
    except (OSError, ValueError, AttributeError):  # no real descriptors (a test runner)
        sys.stdout, own = sys.stderr, False
    try:
        yield
    finally:
        if own:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.close()
        sys.stderr.flush()
        sys.stdout = real
        if saved_fd is not None:
            os.dup2(saved_fd, real.fileno())
            os.close(saved_fd)
