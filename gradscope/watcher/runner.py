"""Run a training script as `python train.py ARGS` would, under a Watcher.

`__main__`, its folder first on sys.path, sys.argv set; its prints go to stderr
when the report takes stdout. The script ending in any way (done, --steps
reached, an exception, sys.exit, Ctrl-C) still yields the report of the steps
recorded so far; the status says which. When the script failed, the report's `where`
is the file:line of the script that raised and the run's `traceback` the one Python
would print for `python train.py` (no runpy or gradscope frames).
"""

from __future__ import annotations

import contextlib
import os
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from gradscope.distributed.watchdog import watching
from gradscope.errors import TargetError, is_own_file, sigterm_raises, user_frame
from gradscope.stdio import user_stdout_to_stderr
from gradscope.watcher.distributed_hooks import DistributedWatch, is_main_process
from gradscope.watcher.report import WatchReport
from gradscope.watcher.session import Watcher


@contextlib.contextmanager
def _as_main(path: str, argv: list[str], quiet_stdout: bool) -> Iterator[None]:
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with user_stdout_to_stderr(quiet_stdout):
            yield
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """The handlers the script installs (a DataLoader's SIGCHLD) are its own: they are
    undone as soon as it ends, before the watcher reads back and judges its steps. (A
    DataLoader's handler raises when a worker was killed: left in place, it raised inside
    gradscope's own code after the script, which read as gradscope's failure.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {}
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            handler = signal.getsignal(number)
            if handler is not None:
                kept[number] = handler
    try:
        yield
    finally:
        for number, handler in kept.items():
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                if signal.getsignal(number) is not handler:
                    signal.signal(number, handler)


def _end_forked_child(parent: int, failure: BaseException | None) -> None:
    """A child the script forked (os.fork) that ran on to the script's end leaves as it
    would without gradscope: its exit code, its own traceback if it raised, no second
    report."""
    if os.getpid() == parent:
        return
    code = 0
    if isinstance(failure, SystemExit):
        code = failure.code if isinstance(failure.code, int) else (0 if failure.code is None else 1)
    elif failure is not None:
        code = 1
        if isinstance(failure, Exception):  # as Python prints it, without our frames
            with contextlib.suppress(Exception):
                sys.stderr.write(script_traceback(failure))
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def run_script(
    path: str, argv: list[str] | None = None, quiet_stdout: bool = False, **options: Any
) -> WatchReport:
    """The report of every step the script made; never raises for the script's failures."""
    if os.path.isdir(path):
        raise TargetError(f"{path} is a folder, not a training script: name the .py file to run")
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file")

    if not is_main_process():  # under torchrun only rank 0 writes files
        options["log"] = None

    hang_timeout = options.pop("hang_timeout", None)
    hooks = DistributedWatch()
    label = options.pop("label", f"script {path}")
    watcher = Watcher(label=label, argv=tuple(argv or ()), **options)
    failure: BaseException | None = None
    parent = os.getpid()
    with _as_main(path, list(argv or []), quiet_stdout):
        try:
            with watcher:
                hooks.bind(watcher)
                with (
                    hooks.guard(),
                    watching(hooks.session, hang_timeout),
                    sigterm_raises(),
                    _signal_handlers_kept(),
                ):
                    runpy.run_path(path, run_name="__main__")
        except BaseException as exc:  # recorded as the run's status by the Watcher
            if watcher.report is None:
                hooks.close()
                raise
            failure = exc
    _end_forked_child(parent, failure)
    report = watcher.report
    assert report is not None
    if report.run.status == "crashed" and failure is not None:
        # sys.exit prints no traceback in Python either
        trace = None if isinstance(failure, SystemExit) else script_traceback(failure)
        where = user_frame(failure)
        report = replace(
            report,
            run=replace(report.run, traceback=trace),
            where=f"{where[0]}:{where[1]}" if where else None,
        )
    return hooks.conclude(report, watcher.settings)


def script_traceback(exc: BaseException) -> str:
    """The traceback `python train.py` would print: chained exceptions included, the
    frames of runpy and of gradscope itself left out."""
    shown = traceback.TracebackException.from_exception(exc)
    seen: set[int] = set()
    todo = [shown]
    while todo:
        te = todo.pop()
        if id(te) in seen:
            continue
        seen.add(id(te))
        te.stack = traceback.StackSummary.from_list(
            [f for f in te.stack if not _hidden(f.filename)]
        )
        todo += [t for t in (te.__cause__, te.__context__) if t is not None]
    return "".join(shown.format())


def _hidden(filename: str) -> bool:
    return (
        is_own_file(filename)
        or filename == "<frozen runpy>"
        or filename.endswith(os.sep + "runpy.py")
    )
