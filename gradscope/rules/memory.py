"""Per-run rules on memory: what keeps the step's graph alive after backward."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding
from gradscope.fmt import human_bytes
from gradscope.rules.base import check
from gradscope.stats import RunStats


@check("GS301")
def graph_retained(stats: RunStats, t: Thresholds) -> list[Finding]:
    return [
        RULES["GS301"].finding(
            attr,
            f"`{attr}` still holds a tensor with a grad_fn after backward: the whole graph "
            f"of the step ({human_bytes(stats.saved_bytes)} of saved activations) stays in "
            "memory, and grows if it accumulates across steps",
            "store `.detach()` (or `.item()` for logged numbers) instead of the live tensor",
        )
        for attr in stats.retained
    ]
