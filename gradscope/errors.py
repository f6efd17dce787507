"""Exit codes and the errors that map to them.

"Found problems" (1), "could not run" (2) and "gradscope itself failed" (3) are
different codes, so a CI job can tell a sick model from a broken set-up from a bug
in gradscope.
"""

from __future__ import annotations

import enum
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, NoReturn

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class ExitCode(enum.IntEnum):
    #: nothing at or above --fail-on
    OK = 0
    #: findings at or above --fail-on
    FINDINGS = 1
    #: the tool could not do its job: bad target or config, the user's code raised
    ERROR = 2
    #: gradscope itself failed: a bug, to be reported
    INTERNAL = 3
    #: interrupted (Ctrl-C)
    INTERRUPTED = 130
    #: terminated (SIGTERM: `timeout`, Slurm, Kubernetes, torchrun stopping the run)
    TERMINATED = 143


class GradscopeError(Exception):
    """An error the user can fix; printed as one line, exit code 2."""

    exit_code = ExitCode.ERROR


class TargetError(GradscopeError):
    """The target spec does not name something gradscope can run."""


class ConfigError(GradscopeError):
    """A config file or option is malformed."""


class GraphvizMissing(GradscopeError):
    """Graphviz's `dot` is not on PATH."""


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived while a training script ran under watch: raised in the script like
    Ctrl-C's KeyboardInterrupt, so the steps so far are reported (see `sigterm_raises`)."""


class UserOsExit(SystemExit):
    """The user's code called os._exit(code) while gradscope ran it: turned into this, so
    the process ends with gradscope's verdict instead of the user's code (see
    `guard_os_exit`)."""


FREED_GRAPH = "backward through the graph a second time"
"""torch's error when a backward reaches nodes an earlier backward freed."""


FREED_BY_GRAD = (
    "; torch.autograd.grad was called without retain_graph=True or create_graph=True "
    "before this backward, and such a call frees the graph it goes through (the forward "
    "a derivative of the output, a Laplacian or a force, was taken on): pass "
    "create_graph=True to each autograd.grad whose graph the loss still goes through "
    "(needed anyway where the loss uses the derivative), or retain_graph=True where it "
    "only reuses the forward"
)
"""The cause of a freed graph where the watcher saw such a call free one (the watcher
appends it to the error)."""

FREED_IN_EVAL = (
    "; that call was made in a module in eval mode that passes create_graph itself "
    "(create_graph=self.training, as force-field models take their forces): call "
    ".train() on the model after the evaluation pass that set eval()"
)
"""Appended to FREED_BY_GRAD where a module in eval mode made that call."""


_DERIVATIVE_CAUSES = {
    "One of the differentiated Tensors does not require grad": (
        "; the derivative is taken with respect to a tensor that did not require grad when "
        "the forward read it (positions, for forces -dE/dx, or the inputs of a gradient "
        "penalty), so the graph never reached it: call .requires_grad_(True) on it before "
        "the forward"
    ),
    "appears to not have been used in the graph": (
        "; the output torch.autograd.grad differentiates does not depend on that input: the "
        "forward never reaches it (a detached or replaced copy of it was read, or a layer "
        "has no path from it to the output, as an equivariant layer asked for an output "
        "irrep, such as a parity-odd energy 0o, that its inputs cannot produce); "
        "allow_unused=True would return None, and a None taken as zeros trains on a constant"
    ),
    "is not positive-definite": (
        "; a matrix meant to be positive-definite (a kernel or a covariance) lost it in "
        "float32: its smallest eigenvalue fell to 0 or below, most often as a learned noise "
        "or variance shrank toward 0, or a kernel met duplicate points: add jitter to the "
        "diagonal (K + 1e-6 * I), keep the learned noise above a floor (softplus(x) + 1e-4), "
        "or factor in float64; torch.linalg.cholesky_ex returns its info instead of raising"
    ),
}
"""torch's errors that name no cause in the training loop (torch.autograd.grad's, a failed
Cholesky factorisation), and the cause."""


def known_cause(error: str) -> str:
    """What a torch error says about the training loop, to follow its text; "" for any
    other. torch's own advice for a freed graph, retain_graph=True, is rarely the fix in a
    loop: the tensor that links the two graphs is."""
    for text, cause in _DERIVATIVE_CAUSES.items():
        if text in error:
            return cause
    if FREED_GRAPH not in error or FREED_BY_GRAD in error:
        return ""
    return (
        "; in a training loop this is a tensor from an earlier step or loss still attached "
        "(an RNN's hidden state carried into the next batch, a generator's output that the "
        "discriminator's loss used): .detach() it where it is carried over; retain_graph=True "
        "would backpropagate through every earlier step, slower at each"
    )


class UserCodeError(GradscopeError):
    """The user's code raised; keeps the original exception for --debug."""

    def __init__(self, what: str, exc: BaseException):
        self.what = what
        self.original = exc
        where = user_frame(exc)
        loc = f"{where[0]}:{where[1]}: " if where else ""
        if isinstance(exc, SystemExit):
            call = "os._exit" if isinstance(exc, UserOsExit) else "sys.exit"
            super().__init__(f"{loc}{what} called {call}({exc.code!r})")
            return
        detail = f"{type(exc).__name__}: {exc}".strip().splitlines()
        text = detail[0] if detail else type(exc).__name__
        super().__init__(f"{loc}{what} raised {text}{known_cause(text)}")

    def user_traceback(self) -> str:
        """The traceback with gradscope's own frames removed."""
        frames = [
            f for f in traceback.extract_tb(self.original.__traceback__) if not _is_ours(f.filename)
        ]
        text = "".join(traceback.format_list(frames))
        tail = "".join(traceback.format_exception_only(type(self.original), self.original))
        return "Traceback (most recent call last, gradscope frames hidden):\n" + text + tail


def _is_ours(filename: str) -> bool:
    """gradscope's own frames; the built-in examples count as user code."""
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR + os.sep) and not path.startswith(
        os.path.join(_PACKAGE_DIR, "examples") + os.sep
    )


def _is_library(filename: str) -> bool:
    if not _is_ours(filename) and filename.startswith(os.path.join(_PACKAGE_DIR, "examples")):
        return False
    return (
        _is_ours(filename)
        or "site-packages" in filename
        or "dist-packages" in filename
        or filename.startswith("<")
    )


def user_frame(exc: BaseException) -> tuple[str, int] | None:
    """The deepest frame of the user's own code (not gradscope, torch or the stdlib)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return _relpath(exc.filename), exc.lineno or 0
    frames = traceback.extract_tb(exc.__traceback__)
    for f in reversed(frames):
        if not _is_library(f.filename) and not f.filename.startswith(os.path.dirname(os.__file__)):
            return _relpath(f.filename), f.lineno or 0
    return None


def _relpath(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def is_own_file(filename: str) -> bool:
    """A frame of gradscope itself (the built-in examples count as the user's code)."""
    return _is_ours(filename)


_STDLIB = os.path.dirname(os.__file__)


def is_user_file(filename: str) -> bool:
    """The user's own code: not gradscope, an installed package, generated code or the
    standard library."""
    return not _is_library(filename) and not filename.startswith(_STDLIB)


def calling_user_frame(start: Any) -> Any:
    """From `start` outwards, past gradscope's own frames, the first frame of the user's
    code; None when library code gradscope itself called comes first."""
    frame = start
    while frame is not None and is_own_file(frame.f_code.co_filename):
        frame = frame.f_back
    while frame is not None:
        name = frame.f_code.co_filename
        if is_own_file(name):
            return None
        if is_user_file(name):
            return frame
        frame = frame.f_back
    return None


def user_line() -> str | None:
    """`file:line` of the user's code that made the current call (a torch op, a
    collective); None when it came from library code that gradscope itself invoked (an
    nn.ReLU inside nn.Sequential has no line of the user's to point at)."""
    frame = calling_user_frame(sys._getframe(1))
    return f"{short_path(frame.f_code.co_filename)}:{frame.f_lineno}" if frame else None


def short_path(path: str) -> str:
    """`path` relative to the working directory when it lies below it."""
    return _relpath(path)


@contextmanager
def guard_os_exit() -> Iterator[None]:
    """While the block runs, os._exit called by the user's code raises `UserOsExit` instead
    of ending the process, so no user code can end gradscope with a success code.

    gradscope's own calls (the hang watchdog) and forked children (a DataLoader worker
    ending itself) reach the real os._exit.
    """
    real, pid = os._exit, os.getpid()

    def _exit(status: int) -> NoReturn:
        caller = sys._getframe(1).f_code.co_filename
        if os.getpid() != pid or _is_ours(caller):
            real(status)
        raise UserOsExit(status)

    os._exit = _exit
    try:
        yield
    finally:
        os._exit = real


_outside: list[Any] = []
"""The SIGTERM handler from before `sigterm_raises` (one entry while it is active): what a
child forked meanwhile gets back."""
_fork = threading.local()


def _hold_sigterm_for_fork() -> None:
    """Before a fork inside `sigterm_raises`, SIGTERM waits (blocked in the forking thread),
    so a child signalled before it has reset its handler keeps the signal pending instead
    of losing it: CPython clears a signal the child caught before its after-fork set-up,
    and a Pool's worker terminated that early would never end (the Pool's join hangs)."""
    if _outside:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        _fork.unblock_after = signal.SIGTERM not in mask


def _unblock_sigterm() -> None:
    """After the fork, the forking thread's mask as it was."""
    if getattr(_fork, "unblock_after", False):
        _fork.unblock_after = False
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _sigterm_as_before_in_child() -> None:
    """A child the script forked (a Pool's worker) handles SIGTERM as it would without
    gradscope: the handler from before (default: it ends by the signal, no traceback)."""
    if _outside:
        with suppress(ValueError, OSError):
            signal.signal(signal.SIGTERM, _outside[0])
        _outside.clear()
    _unblock_sigterm()


os.register_at_fork(
    before=_hold_sigterm_for_fork,
    after_in_parent=_unblock_sigterm,
    after_in_child=_sigterm_as_before_in_child,
)


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs in the main thread, SIGTERM raises `Terminated` where the code
    is, as Ctrl-C raises KeyboardInterrupt, instead of ending the process silently. A
    handler the block installs itself wins for as long as it is there; a child forked in
    the block gets the handler from before."""
    if threading.current_thread() is not threading.main_thread() or _outside:
        yield
        return

    def terminated(signum: int, frame: Any) -> None:
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminated)
    _outside.append(signal.SIG_DFL if previous is None else previous)
    try:
        yield
    finally:
        _outside.clear()
        signal.signal(signal.SIGTERM, previous)
