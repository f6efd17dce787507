"""The user's code prints; gradscope's report on stdout stays what it is.

Used wherever user code runs while a report may be headed for stdout (every command,
and `watch`'s whole run); and the standard descriptors open, wherever the caller closed
one. No torch here.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def standard_streams() -> None:
    """Descriptors 0, 1 and 2 open, on /dev/null where the caller closed one (`2>&-`, some
    runners): else the next file opened (a report's temporary file, the script's data)
    takes that number and what is written to stderr lands in it; and sys.stdout and
    sys.stderr streams to write to, not None."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free number: fd
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    for name, fd in (("stdout", 1), ("stderr", 2)):
        if getattr(sys, name) is None:
            stream = open(fd, "w", errors="backslashreplace", closefd=False)
            setattr(sys, name, stream)
            if getattr(sys, f"__{name}__") is None:
                setattr(sys, f"__{name}__", stream)


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
        # the report's stream writes to descriptor 1 (itself, or a wrapper of it such as
        # watch's status line): then what the script writes there moves too
        if fd >= 0 and _descriptor(sys.stdout) == fd:
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


def _descriptor(stream: object) -> int:
    """The file descriptor `stream` writes to; -1 for one in memory (a test runner's)."""
    try:
        return int(stream.fileno())  # type: ignore[attr-defined]
    except (OSError, ValueError, AttributeError):
        return -1
