"""Judging a watched run: the GS4xx rules under the user's settings, worst first.

The watcher records a run and calls `judge` once at its end; the views read the
findings (and the steps each is about), never the rules.
"""

from __future__ import annotations

from gradscope.config import Settings
from gradscope.rules import steps
from gradscope.watcher.records import WatchRun
from gradscope.watcher.report import WatchReport


def judge(run: WatchRun, settings: Settings) -> WatchReport:
    findings = settings.judged(steps.diagnose(run, settings.thresholds))
    findings.sort(key=lambda f: (-f.severity, f.rule))
    return WatchReport.of(run, findings, settings)
