"""Per-run rules: findings from one RunStats, as pure functions (no torch).

A new rule: write its check in the module of its kind (experts.py, grads.py,
magnitude.py, zeros.py, memory.py, logits.py) and declare it there with `@rule(..., Stage.RUN, ...)`
(registry.py). `diagnose` runs them all, in the order their modules are imported here,
applies the user's severities and marks what their ignores silence.
"""

from __future__ import annotations

from collections.abc import Callable

from gradscope.config import Settings, Thresholds
from gradscope.findings import Finding

# isort: off
# imported in the order their checks run, the order of a report's findings: experts
# (GS109), grads (GS101-GS103), magnitude (GS104, GS105), zeros (GS106, GS108, GS107), memory
# (GS301), logits (GS432)
from gradscope.rules import experts, grads, magnitude, zeros, memory, logits  # noqa: F401

# isort: on
from gradscope.rules.params import dense_rms
from gradscope.rules.registry import Stage, in_declared_order
from gradscope.stats import RunStats

__all__ = ["CHECKS", "Check", "dense_rms", "diagnose"]

Check = Callable[[RunStats, Thresholds], "list[Finding]"]
CHECKS: dict[str, Check] = in_declared_order(Stage.RUN)
"""Rule id → its per-run check, in the order they run."""


def diagnose(stats: RunStats, settings: Settings | None = None) -> list[Finding]:
    settings = settings or Settings()
    findings: list[Finding] = []
    for rule_check in CHECKS.values():
        findings.extend(rule_check(stats, settings.thresholds))
    return settings.judged(findings)
