"""Per-run rules: findings from one RunStats, as pure functions (no torch).

A new rule: declare its id in gradscope/findings.py, write it in the module of its
family (grads.py, memory.py) with `@check("GS1xx")`. `diagnose` runs them all and
applies the user's severities and marks what their ignores silence.
"""

from __future__ import annotations

from gradscope.config import Settings
from gradscope.findings import Finding
from gradscope.rules import grads, memory  # noqa: F401  (registers their checks)
from gradscope.rules.base import CHECKS
from gradscope.rules.grads import dense_rms
from gradscope.stats import RunStats

__all__ = ["CHECKS", "dense_rms", "diagnose"]


def diagnose(stats: RunStats, settings: Settings | None = None) -> list[Finding]:
    settings = settings or Settings()
    findings: list[Finding] = []
    for rule_check in CHECKS.values():
        findings.extend(rule_check(stats, settings.thresholds))
    return settings.judged(findings)
