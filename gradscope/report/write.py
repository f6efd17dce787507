"""Writing results: to stdout, or atomically to a file (never half-written)."""

from __future__ import annotations

import os
import sys
import tempfile

from gradscope.errors import GradscopeError


def write_atomic(path: str, data: str | bytes) -> None:
    """Write to a temporary file beside `path`, then rename it into place."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise GradscopeError(f"cannot write {path}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gradscope-", dir=folder)
    except OSError as exc:
        raise GradscopeError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise GradscopeError(f"cannot write {path}: {exc.strerror}") from None
        raise


def emit(text: str, output: str | None) -> None:
    """Text to `output` (atomically) or to stdout."""
    if output and output != "-":
        write_atomic(output, text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
