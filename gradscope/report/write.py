"""Writing results to what the user named, and never replacing it with something else.

A regular file is replaced atomically (a temporary file beside it, then a rename)
and keeps its mode; a symlink is written through, atomically at its target; a
device or a FIFO (/dev/null, /dev/stdout, a named pipe) is written directly,
since renaming over it would turn it into a regular file. Paths are resolved
when the command starts (`destination`), so a target that changes directory
cannot move the report.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from gradscope.errors import GradscopeError


def to_stdout(output: str | None) -> bool:
    return output is None or output == "-"


def destination(path: str | None, option: str = "--output") -> str | None:
    """Check an output path before any work starts; return it absolute (None/"-": stdout)."""
    if path is None or path == "-":
        return path
    if not path.strip():
        raise GradscopeError(f"{option}: empty path (use - for stdout)")
    full = os.path.abspath(path)
    target = os.path.realpath(full)
    if os.path.isdir(target):
        raise GradscopeError(f"cannot write {path}: it is a folder")
    if os.path.exists(target) and not stat.S_ISREG(os.stat(target).st_mode):
        return full  # a device or FIFO: written directly
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise GradscopeError(f"cannot write {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise GradscopeError(f"cannot write {path}: folder {folder} is not writable")
    return full


def folder_destination(path: str, option: str) -> str:
    """Check an output folder before any work starts (it is made if missing); absolute."""
    full = os.path.abspath(path)
    if os.path.exists(full) and not os.path.isdir(full):
        raise GradscopeError(f"{option} {path}: it is a file, not a folder")
    existing = full
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing, os.W_OK):
        raise GradscopeError(f"{option} {path}: folder {existing} is not writable")
    return full


def distinct(outputs: dict[str, str | None], inputs: dict[str, str | None]) -> None:
    """Refuse, before anything is opened, two options naming one file, or an output naming
    an input (`--log train.py` would empty the script it is about to run). Devices and
    FIFOs (/dev/null twice) are not files to protect."""
    seen: dict[str, str] = {}
    for option, path in inputs.items():
        if path and os.path.isfile(path):
            seen[os.path.realpath(path)] = option
    for option, path in outputs.items():
        if not path or path == "-":
            continue
        real = os.path.realpath(path)
        if os.path.exists(real) and not os.path.isfile(real):
            continue
        if real in seen:
            raise GradscopeError(f"{option} {path}: the same file as {seen[real]}")
        seen[real] = option


def write_file(path: str, data: str | bytes) -> None:
    """Write `data` to `path` without ever leaving it half-written or replaced by another kind."""
    raw = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    target = os.path.realpath(path)  # through symlinks
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise GradscopeError(f"cannot write {path}: {exc.strerror}") from None
    if mode is not None and not stat.S_ISREG(mode):
        _write_directly(path, target, raw)
    else:
        _replace_atomically(path, target, raw, None if mode is None else stat.S_IMODE(mode))


READER_GRACE_S = 2.0
"""How long a FIFO's reader may take to appear before the write is given up."""


def _open_without_waiting(path: str, target: str) -> int:
    """A FIFO nobody reads is an error after a short grace, not a command that never ends
    (a blocking open would wait for a reader forever)."""
    deadline = time.monotonic() + READER_GRACE_S
    while True:
        try:
            return os.open(target, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise GradscopeError(f"cannot write {path}: {exc.strerror}") from None
            if time.monotonic() > deadline:
                raise GradscopeError(
                    f"cannot write {path}: no process read it within {READER_GRACE_S:g} s"
                ) from None
            time.sleep(0.05)


def _write_directly(path: str, target: str, raw: bytes) -> None:
    """A device, or a FIFO."""
    fd = _open_without_waiting(path, target)
    try:
        os.set_blocking(fd, True)  # a reader is there: wait for it to take all of it
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    except OSError as exc:
        raise GradscopeError(f"cannot write {path}: {exc.strerror}") from None


def _replace_atomically(path: str, target: str, raw: bytes, mode: int | None) -> None:
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise GradscopeError(f"cannot write {path}: folder {folder} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".gradscope-", dir=folder)
    except OSError as exc:
        raise GradscopeError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        # mkstemp makes 0600: keep the replaced file's mode, else an ordinary file's
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise GradscopeError(f"cannot write {path}: {exc.strerror}") from None
        raise


def emit(text: str, output: str | None) -> None:
    """Text to `output` or to stdout."""
    if not to_stdout(output):
        assert output is not None
        write_file(output, text)
        return
    try:
        sys.stdout.write(encodable(text))
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()  # the reader left (`| head`): the verdict's exit code stands
    except OSError as exc:
        raise GradscopeError(f"cannot write to stdout: {exc.strerror}") from None


def encodable(text: str) -> str:
    """`text` with what UTF-8 cannot encode (a lone surrogate from the user's error
    message) shown as an escape instead of failing the write."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def append_to(path: str, text: str) -> bool:
    """Append (for $GITHUB_STEP_SUMMARY). A summary that cannot be written is a warning on
    stderr, never the verdict: returns False."""
    try:
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text)
    except OSError as exc:
        sys.stderr.write(f"gradscope: warning: cannot append to {path}: {exc.strerror}\n")
        return False
    return True


def _stdout_to_devnull() -> None:
    """After a broken pipe: later writes and the interpreter's final flush go nowhere
    instead of raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor (a test runner)
        pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
