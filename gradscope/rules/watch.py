"""Judging a watched run: the GS4xx rules under the user's settings, worst first.

The watcher records a run (gradscope/steps/) and calls `judge` once at its end; the
views read the findings (and the steps each is about), never the rules.
"""

from __future__ import annotations

from gradscope.config import Settings, Thresholds
from gradscope.findings import Finding
from gradscope.rules import causes, step_meaning, steps
from gradscope.steps.records import WatchRun

CHECKS = [*steps.CHECKS, *step_meaning.CHECKS]
"""Every GS4xx rule: the series rules (and how the run is set up), then those judged by
what the numbers mean."""


def judge(run: WatchRun, settings: Settings) -> list[Finding]:
    """Every finding, ignored ones marked (`ignored_by`); causes first, worst first, each
    symptom marked with its cause (rules/causes.py)."""
    with run.store.held():
        findings = settings.judged(diagnose(run, settings.thresholds))
    return causes.link(run, findings)


def diagnose(run: WatchRun, t: Thresholds) -> list[Finding]:
    out = [finding for rule in CHECKS for finding in rule(run, t)]
    stopped = {f.subject for f in out if f.rule == "GS417"}
    # a parameter frozen midway is GS417's: its low update ratio is the consequence
    return [f for f in out if not (f.rule == "GS410" and f.subject in stopped)]
