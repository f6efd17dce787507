"""Per-run rules: findings from one RunStats, as pure functions (no torch).

A new rule: write its check in the module of its kind (experts.py, grads.py,
magnitude.py, zeros.py, memory.py, logits.py) and declare it there with `@rule(..., Stage.RUN, ...)`
(registry.py). `diagnose` runs them all, in the order gradscope/catalogue.py lists their
modules, applies the user's severities and marks what their ignores silence. Importing
this package loads no rule: the catalogue does, on the registry's first read.
"""

from __future__ import annotations

from collections.abc import Callable

from gradscope.config import Settings, Thresholds
from gradscope.findings import Finding
from gradscope.rules.params import dense_rms
from gradscope.rules.registry import Stage, in_declared_order
from gradscope.stats import RunStats

__all__ = ["CHECKS", "Check", "dense_rms", "diagnose"]

Check = Callable[[RunStats, Thresholds], "list[Finding]"]


def __getattr__(name: str) -> dict[str, Check]:
    """CHECKS: rule id → its per-run check, in the order they run (read when asked, so
    importing the package declares nothing)."""
    if name == "CHECKS":
        return in_declared_order(Stage.RUN)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def diagnose(stats: RunStats, settings: Settings | None = None) -> list[Finding]:
    settings = settings or Settings()
    findings: list[Finding] = []
    for rule_check in in_declared_order(Stage.RUN).values():
        findings.extend(rule_check(stats, settings.thresholds))
    return settings.judged(findings)
