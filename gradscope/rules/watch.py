"""Judging a watched run: the GS4xx rules under the user's settings, worst first.

The watcher records a run (gradscope/steps/) and calls `judge` once at its end; the
views read the findings (and the steps each is about), never the rules. Each rule is
declared with `@rule(..., Stage.WATCH, ...)` on its check (rules/registry.py) in one of
the modules imported below (steps.py and the step_*.py of each kind); importing them
here declares them.
"""

from __future__ import annotations

from gradscope.config import Settings, Thresholds
from gradscope.findings import Finding
from gradscope.rules import (  # noqa: F401  (declare)
    causes,
    step_batch,
    step_blowup,
    step_clipping,
    step_eps,
    step_eval_train,
    step_layers,
    step_logits,
    step_lr_jump,
    step_meaning,
    step_modes,
    step_nan,
    step_optimizer,
    step_outside,
    step_progress,
    step_reduction,
    step_same_batch,
    step_schedule,
    step_setup,
    step_stale,
    step_trends,
    step_vlag,
    step_wiped,
    steps,
)
from gradscope.rules.registry import Stage, checks
from gradscope.steps.records import WatchRun

CHECKS = checks(Stage.WATCH)
"""Every GS4xx rule's check, in rule id order."""


def judge(run: WatchRun, settings: Settings) -> list[Finding]:
    """Every finding, ignored ones marked (`ignored_by`); causes first, worst first, each
    symptom marked with its cause and what a cause supersedes dropped (rules/causes.py)."""
    with run.store.held():
        findings = settings.judged(diagnose(run, settings.thresholds))
    return causes.link(run, findings)


def diagnose(run: WatchRun, t: Thresholds) -> list[Finding]:
    return [finding for rule in CHECKS for finding in rule(run, t)]
