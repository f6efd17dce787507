"""A tensor that started at exactly 0 and got only exact zero gradients (GS413): zero in,
zero out. A ReLU (or a clamp) over an input of zeros passes no gradient, and a product of
two tensors that are both 0 gives each a gradient of the other's zeros: a voxel grid's
density started at 0 under a ReLU, and the colours the renderer weighs by it; two stacked
layers both initialised to zero. Nothing moves them away from 0, so the graph is whole and
still nothing learns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.fmt import num
from gradscope.steps.records import ParamInfo, WatchRun


def started_at_zero(p: ParamInfo) -> bool:
    """Its norm before the first update was exactly 0 (every value 0)."""
    return p.weight_norm == 0


def as_zero_start(finding: Finding, p: ParamInfo, steps: int) -> Finding:
    """GS413's finding for a tensor of zeros that only ever got zero gradients."""
    return replace(
        finding,
        message=f"{p.name} got only zero gradients in all {steps} steps, and every value of "
        "it was exactly 0 at the first step: whatever reads it passes no gradient at 0 (a "
        "ReLU or clamp over zeros, or a product with another tensor that is 0 too, as two "
        "stacked layers both initialised to zero are)",
        advice="start it away from 0 (its layer's default initialisation; a density grid at "
        "a small positive value, as Plenoxels' 0.1), or read it through an op with a "
        "gradient at 0 (softplus instead of ReLU); if it is meant to stay out of the loss, "
        "freeze it",
        evidence=(*finding.evidence, f"norm before the first update: {num(0.0)}"),
    )


def zero_layer_stepped(run: WatchRun, got_grad: Callable[[WatchRun, int], bool]) -> str | None:
    """The first weight of two dimensions or more an optimizer steps that started at exactly
    0 and got a gradient: a layer initialised to zero on purpose, which the first update
    moves (a bias that starts at 0, as most do, says nothing of the sort)."""
    for j, q in enumerate(run.params):
        if q.in_optimizer and len(q.shape) >= 2 and started_at_zero(q) and got_grad(run, j):
            return q.name
    return None


def as_behind_zero_layer(finding: Finding, p: ParamInfo, zero: str) -> Finding:
    """Information: zeros at the run's only step, while a layer initialised to zero got its
    first gradient: what comes before that layer gets none until the layer's first update
    (a zero head; a neural cellular automaton's update rule, which starts as doing nothing).
    One step says nothing of the steps after it."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{p.name} got only zero gradients at the one step of the run, while {zero}, "
        "which started at exactly 0, got a gradient: a layer initialised to zero passes no "
        "gradient to what comes before it until its first update moves it away from 0",
        advice="nothing to do for a deliberate zero initialisation (a zero head, an update "
        "that starts as nothing): it resolves at the first step; watch two steps or more to "
        "judge whether it learns",
        evidence=(*finding.evidence, f"{zero}: norm {num(0.0)} before the first update"),
    )
