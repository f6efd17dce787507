"""A watched run as a `gradscope check` target: `[[watch]]` entries and the CI formats."""

from __future__ import annotations

import os
import time

from gradscope.config import CheckEntry, Settings
from gradscope.results import CheckReport, TargetResult
from gradscope.watcher.report import WatchReport


def result(report: WatchReport, duration_s: float | None = None) -> TargetResult:
    """A crashed or interrupted script, or a run in which no step was judged, is an error
    (it could not run), not a finding and never a pass."""
    run = report.run
    error = None
    if run.status == "crashed":
        error = f"{report.failure()} (after {len(run.steps)} optimizer steps)"
    elif run.status in ("interrupted", "terminated"):
        error = f"{run.status} after {len(run.steps)} optimizer steps"
    elif not report.judged:
        error = report.nothing_judged()
    label = report.run.label.removeprefix("script ")
    return TargetResult(
        "watch",
        label,
        list(report.findings),
        document=report.to_dict(),
        error=error,
        duration_s=report.run.duration_s if duration_s is None else duration_s,
        file=label if label.endswith(".py") else None,
    )


def as_check(report: WatchReport) -> CheckReport:
    return CheckReport([result(report)], report.fail_on)


def run_entry(entry: CheckEntry, settings: Settings) -> TargetResult:
    """One `[[watch]]` entry: its script relative to the config file that names it."""
    from gradscope.errors import GradscopeError
    from gradscope.watcher.runner import run_script

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
        return TargetResult("watch", entry.target, error=str(exc), file=script)
    return result(report, time.perf_counter() - start)
