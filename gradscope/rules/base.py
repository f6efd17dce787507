"""The per-run rule registry: `@check("GS101")` binds a function of RunStats to its rule id."""

from __future__ import annotations

from collections.abc import Callable

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding
from gradscope.stats import RunStats

Check = Callable[[RunStats, Thresholds], "list[Finding]"]
CHECKS: dict[str, Check] = {}


def check(rule_id: str) -> Callable[[Check], Check]:
    if RULES[rule_id].source != "run":
        raise ValueError(f"{rule_id} is produced by {RULES[rule_id].source}, not by a per-run rule")

    def register(fn: Check) -> Check:
        CHECKS[rule_id] = fn
        return fn

    return register
