"""Writing results to what the user named, and never replacing it with something else.

A regular file is replaced atomically (a temporary file beside it, then a rename)
and keeps its mode; a symlink is written through, atomically at its target; a
device or a FIFO (/dev/null, /dev/stdout, a named pipe) is written directly,
since renaming over it would turn it into a regular file. Paths are resolved
when the command starts (`destination`), so a target that changes directory
cannot move the report.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
import time

from gradscope.errors import ExitCode, GradscopeError
from gradscope.report.ascii_text import for_encoding


class NotWritten(GradscopeError):
    """Outputs that could not be written, each one's line, once every other one was:
    exit 2, or the verdict's code where that is worse (3, 130, 143)."""

    def __init__(self, lines: list[str], verdict: int = ExitCode.OK) -> None:
        super().__init__("; ".join(lines))
        self.lines = lines
        self.exit_code = ExitCode(verdict) if verdict > ExitCode.ERROR else ExitCode.ERROR


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


class Ledger:
    """The files this command was asked for and those it wrote: what a Ctrl-C before the
    report says it did not write."""

    def __init__(self) -> None:
        self.named: dict[str, str] = {}
        """absolute path → the name the user gave"""
        self.written: set[str] = set()

    def reset(self) -> None:
        self.named.clear()
        self.written.clear()

    def missing(self) -> list[str]:
        return [name for path, name in self.named.items() if path not in self.written]


LEDGER = Ledger()


def emit(text: str, output: str | None, markup: str | None = None) -> None:
    """Text to `output` or to stdout (in what its encoding can write: `markup`, "json" or
    "xml", escapes in that format's way)."""
    if not to_stdout(output):
        assert output is not None
        write_file(output, text)
        LEDGER.written.add(os.path.abspath(output))
        return
    try:
        sys.stdout.write(for_encoding(text, getattr(sys.stdout, "encoding", None), markup))
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()  # the reader left (`| head`): the verdict's exit code stands
    except OSError as exc:
        raise GradscopeError(f"cannot write to stdout: {exc.strerror}") from None


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
