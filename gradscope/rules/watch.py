"""Judging a watched run: the GS4xx rules under the user's settings, worst first.

The watcher records a run (gradscope/steps/) and calls `judge` once at its end; the
views read the findings (and the steps each is about), never the rules.
"""

from __future__ import annotations

from gradscope.config import Settings
from gradscope.findings import Finding
from gradscope.rules import causes, steps
from gradscope.steps.records import WatchRun


def judge(run: WatchRun, settings: Settings) -> list[Finding]:
    """Every finding, ignored ones marked (`ignored_by`); causes first, worst first, each
    symptom marked with its cause (rules/causes.py)."""
    with run.store.held():
        findings = settings.judged(steps.diagnose(run, settings.thresholds))
    return causes.link(run, findings)
