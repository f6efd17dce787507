"""Run a training script as `python train.py ARGS` would, under a Watcher.

`__main__`, its folder first on sys.path, sys.argv set; its prints go to stderr
when the report takes stdout. The script ending in any way (done, --steps
reached, an exception, sys.exit, Ctrl-C) still yields the report of the steps
recorded so far; the status says which.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
from collections.abc import Iterator
from typing import Any

from gradscope.errors import TargetError
from gradscope.watcher.report import WatchReport
from gradscope.watcher.session import Watcher


@contextlib.contextmanager
def _as_main(path: str, argv: list[str], quiet_stdout: bool) -> Iterator[None]:
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with contextlib.ExitStack() as stack:
            if quiet_stdout:
                stack.enter_context(contextlib.redirect_stdout(sys.stderr))
            yield
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


def run_script(
    path: str, argv: list[str] | None = None, quiet_stdout: bool = False, **options: Any
) -> WatchReport:
    """The report of every step the script made; never raises for the script's failures."""
    if not os.path.isfile(path):
        raise TargetError(f"{path}: no such file")
    from gradscope.watcher.distributed_hooks import DistributedWatch, is_main_process

    if not is_main_process():  # under torchrun only rank 0 writes files
        options["log"] = None
    from gradscope.distributed.watchdog import watching

    hang_timeout = options.pop("hang_timeout", None)
    hooks = DistributedWatch()
    watcher = Watcher(label=options.pop("label", f"script {path}"), **options)
    with _as_main(path, list(argv or []), quiet_stdout):
        try:
            with watcher:
                hooks.bind(watcher)
                with hooks.guard(), watching(hooks.session, hang_timeout):
                    runpy.run_path(path, run_name="__main__")
        except BaseException:  # recorded as the run's status by the Watcher
            if watcher.report is None:
                hooks.close()
                raise
    assert watcher.report is not None
    return hooks.conclude(watcher.report, watcher.settings)
