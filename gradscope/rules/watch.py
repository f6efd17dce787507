"""Judging a watched run: the GS4xx rules under the user's settings, worst first.

The watcher records a run (gradscope/steps/) and calls `judge` once at its end; the
views read the findings (and the steps each is about), never the rules. Each rule is
declared with `@rule(..., Stage.WATCH, ...)` on its check (rules/registry.py) in one of
the modules gradscope/catalogue.py lists (steps.py and the step_*.py of each kind), which
the registry loads on its first read.
"""

from __future__ import annotations

from collections.abc import Callable

from gradscope.config import Settings, Thresholds
from gradscope.findings import Finding
from gradscope.rules import causes
from gradscope.rules.range_test import after_range_test
from gradscope.rules.registry import Stage, checks
from gradscope.rules.trials import attribute
from gradscope.steps.records import WatchRun

Check = Callable[[WatchRun, Thresholds], "list[Finding]"]


def __getattr__(name: str) -> list[Check]:
    """CHECKS: every GS4xx rule's check, in rule id order (the catalogue loaded first)."""
    if name == "CHECKS":
        return checks(Stage.WATCH)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def judge(run: WatchRun, settings: Settings) -> list[Finding]:
    """Every finding, ignored ones marked (`ignored_by`); causes first, worst first, each
    symptom marked with its cause and what a cause supersedes dropped (rules/causes.py).
    An lr range test at the run's start is left out (rules/range_test.py); a finding about
    one of many trainings run one after another says which (rules/trials.py)."""
    run = after_range_test(run)
    with run.store.held():
        findings = settings.judged(diagnose(run, settings.thresholds))
        return attribute(run, causes.link(run, findings))


def diagnose(run: WatchRun, t: Thresholds) -> list[Finding]:
    return [finding for rule in checks(Stage.WATCH) for finding in rule(run, t)]
