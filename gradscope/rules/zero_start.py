"""A tensor that started at exactly 0 and got only exact zero gradients (GS413): zero in,
zero out. A ReLU (or a clamp) over an input of zeros passes no gradient, and a product of
two tensors that are both 0 gives each a gradient of the other's zeros: a voxel grid's
density started at 0 under a ReLU, and the colours the renderer weighs by it; two stacked
layers both initialised to zero. Nothing moves them away from 0, so the graph is whole and
still nothing learns."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding
from gradscope.fmt import num
from gradscope.steps.records import ParamInfo


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
