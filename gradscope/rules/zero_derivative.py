"""A weight whose only path to the loss runs through an op with a zero derivative
(`torch.sign`, `torch.round`, ...) or a custom autograd.Function: it is in the graph, and
got exact zeros all run (GS413). torch hands zeros through a step function by definition;
a binarised or quantised layer trains through one only with a straight-through estimator
(the forward's value, the identity's gradient), and a custom Function written as one
blocks the gradient when its backward returns zeros."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding
from gradscope.steps.records import ParamInfo

CUSTOM = "Function "
"""How watcher/flat_ops.py names a custom autograd.Function."""


def as_flat(finding: Finding, p: ParamInfo, steps: int) -> Finding:
    """GS413's finding for zero gradients below a zero-derivative op or a custom Function:
    the op named, and the estimator that passes a gradient through it."""
    op = p.flat_op or ""
    head = f"{p.name} got only zero gradients in all {steps} steps: it reaches the loss through"
    if op.startswith(CUSTOM):
        name = op.removeprefix(CUSTOM)
        return replace(
            finding,
            message=f"{head} the custom autograd.Function {name}: where its backward hands "
            "back zeros, nothing below it learns",
            advice=f"check {name}.backward: a straight-through estimator returns the incoming "
            "gradient (masked to |x| <= 1 for a sign), not zeros or a product with 0",
            evidence=(*finding.evidence, f"{name} lies between {p.name} and the loss"),
        )
    return replace(
        finding,
        message=f"{head} {op}, whose derivative is 0 wherever it is defined, so every "
        "gradient below it is 0",
        advice=f"pass the gradient straight through {op} (a straight-through estimator): "
        f"x + ({op}(x) - x).detach(), or a custom autograd.Function whose backward returns "
        "the incoming gradient (masked to |x| <= 1 for a sign, as binarised networks do)",
        evidence=(*finding.evidence, f"{op} lies between {p.name} and the loss"),
    )
