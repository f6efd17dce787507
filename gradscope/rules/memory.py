"""Per-run rules on memory: what keeps the step's graph alive after backward."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import human_bytes
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.stats import RunStats


@rule(
    "GS301",
    "graph-retained",
    Severity.WARNING,
    "oom",
    Stage.RUN,
    "a module attribute keeps a tensor with a grad_fn, and so the step's graph, alive",
    example="self.last = out in forward",
    fix="store out.detach() (or .item() for a logged number) instead of the live tensor",
    command="gradscope inspect retained-graph",
)
def graph_retained(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """After the backward a module attribute still holds a tensor with a grad_fn, so the step's
    whole graph and its saved activations stay in memory, and grow if the attribute accumulates
    across steps."""
    return [
        this.finding(
            attr,
            f"`{attr}` still holds a tensor with a grad_fn after backward: the whole graph "
            f"of the step ({human_bytes(stats.saved_bytes)} of saved activations) stays in "
            "memory, and grows if it accumulates across steps",
            "store `.detach()` (or `.item()` for logged numbers) instead of the live tensor",
        )
        for attr in stats.retained
    ]
