"""A `[[watch]]` entry of `gradscope check`: its script run under watch, as an Outcome."""

from __future__ import annotations

import os
import time

from gradscope.config import CheckEntry, Settings
from gradscope.errors import GradscopeError
from gradscope.outcome import Outcome
from gradscope.watcher.runner import run_script


def run_entry(entry: CheckEntry, settings: Settings) -> Outcome:
    """One `[[watch]]` entry: its script relative to the config file that names it."""

    base = os.path.dirname(os.path.abspath(entry.source))
    script = entry.target
    if not os.path.isabs(script):
        script = os.path.relpath(os.path.join(base, script))
    own = settings.for_entry(entry)
    start = time.perf_counter()
    try:
        report = run_script(
            script,
            list(entry.options.get("args", [])),
            quiet_stdout=True,
            settings=own,
            steps=entry.options.get("steps"),
            label=script,
        )
    except GradscopeError as exc:
        return Outcome("watch", entry.target, could_not_run=str(exc), file=script)
    outcome = report.outcome()
    outcome.duration_s, outcome.detail = time.perf_counter() - start, None
    return outcome
