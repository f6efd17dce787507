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
    "a module attribute keeps the step's graph alive after backward: a list that gathers "
    "tensors with a grad_fn, or a tensor whose graph still holds saved activations",
    example="self.outputs.append(out) in forward",
    fix="store out.detach() (or .item() for a logged number) instead of the live tensor",
    command="gradscope inspect retained-graph",
)
def graph_retained(stats: RunStats, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """After the backward a module attribute keeps the step's graph alive: a list or dict of
    tensors with a grad_fn, which grows a graph a step if it gathers them, or a tensor whose
    graph still holds saved activations (off the loss's path, or kept by retain_graph). A
    tensor the loss used (a KL or auxiliary loss kept on its module) holds only the nodes the
    backward freed, until the next forward replaces it: not named."""
    return [
        this.finding(
            attr,
            f"`{attr}` still holds tensors with a grad_fn after backward: their graph stays in "
            f"memory (the step saved {human_bytes(stats.saved_bytes)} of activations), and "
            "grows if it gathers them across steps",
            "store `.detach()` (or `.item()` for logged numbers) instead of the live tensor",
        )
        for attr in stats.retained
    ]
