"""A weight whose only path to the loss runs through an op with a zero derivative
(`torch.sign`, `torch.round`, ...) or a custom autograd.Function: it is in the graph, and
its gradient is exact zeros (GS413 over a run, GS106 in one pass). torch hands zeros
through a step function by definition; a binarised or quantised layer trains through one
only with a straight-through estimator (the forward's value, the identity's gradient), and
a custom Function written as one blocks the gradient when its backward returns zeros. A
custom Function's backward that returns None for an input hands nothing to it, or to what
lies below it: by design for a fixed matrix (feedback alignment's random feedback weights),
a bug for a weight meant to learn; either way its backward is the place to look. A weight
read only through a torch.where branch that its condition never chose gets zeros too: no
estimator helps there, the condition says whether that is meant. A weight multiplied by a
constant 0 (`0. * x`) gets zeros too: information where an installed library writes it (its
placeholder), a warning naming the product where the script does."""

from __future__ import annotations

from dataclasses import replace

from gradscope.autograd_walk import (
    CANCELLED,
    CUSTOM_FUNCTION,
    TIMES_ZERO,
    WHERE_UNCHOSEN,
    ZERO_POINT,
)
from gradscope.findings import Finding, Severity
from gradscope.rules import zero_point
from gradscope.steps.records import ParamInfo


def as_flat(finding: Finding, p: ParamInfo, steps: int) -> Finding:
    """GS413's finding for zero gradients below a zero-derivative op or a custom Function."""
    head = f"{p.name} got only zero gradients in all {steps} steps"
    if p.flat_op == ZERO_POINT:
        return zero_point.as_information(finding, p, head)
    return told(finding, p.name, p.flat_op or "", head, p.library_holder)


def below_custom(p: ParamInfo) -> bool:
    """It lies below the user's own custom Function in the graphs read."""
    return (p.flat_op or "").startswith(CUSTOM_FUNCTION)


def as_none(finding: Finding, p: ParamInfo, steps: int) -> Finding:
    """GS413's finding for a None gradient below the user's own custom Function."""
    fn = (p.flat_op or "").removeprefix(CUSTOM_FUNCTION)
    return replace(
        finding,
        message=f"{p.name} got no gradient (None) in all {steps} steps: it reaches the loss "
        f"through the custom autograd.Function {fn}, whose backward returns None for it (or "
        "for what it lies below)",
        advice="if it is meant to stay fixed (feedback alignment's random feedback matrix, a "
        "fixed projection), freeze it with requires_grad_(False) or register it as a buffer; "
        f"if it is meant to learn, return its gradient from {fn}.backward",
        evidence=(*finding.evidence, f"{fn} lies between {p.name} and the loss"),
    )


def told(finding: Finding, name: str, op: str, head: str, library: str = "") -> Finding:
    """The finding with the op named, and the estimator that passes a gradient through it;
    `library`: the installed library's class holding the tensor, where one does."""
    if op == WHERE_UNCHOSEN:
        return _unchosen(finding, name, head)
    if op == CANCELLED:
        return _cancelled(finding, name, head)
    if op == TIMES_ZERO:
        return _times_zero(finding, name, head, library)
    if op.startswith(CUSTOM_FUNCTION):
        fn = op.removeprefix(CUSTOM_FUNCTION)
        return replace(
            finding,
            message=f"{head}: it reaches the loss through the custom autograd.Function {fn}: "
            "where its backward hands back zeros, nothing below it learns",
            advice=f"check {fn}.backward: a straight-through estimator returns the incoming "
            "gradient (masked to |x| <= 1 for a sign), not zeros or a product with 0",
            evidence=(*finding.evidence, f"{fn} lies between {name} and the loss"),
        )
    return replace(
        finding,
        message=f"{head}: it reaches the loss through {op}, whose derivative is 0 wherever "
        "it is defined, so every gradient below it is 0",
        advice=f"pass the gradient straight through {op} (a straight-through estimator): "
        f"x + ({op}(x) - x).detach(), or a custom autograd.Function whose backward returns "
        "the incoming gradient"
        + (" (masked to |x| <= 1, as binarised networks do)" if op == "torch.sign" else ""),
        evidence=(*finding.evidence, f"{op} lies between {name} and the loss"),
    )


def _unchosen(finding: Finding, name: str, head: str) -> Finding:
    """The zeros of a tensor read only through a torch.where branch never chosen: a case
    the run never met (a first step's placeholder that a multi-start decoder skips), or a
    condition that is wrong."""
    return replace(
        finding,
        message=f"{head}: it reaches the loss only through a torch.where branch whose "
        "condition never chose it, so every gradient to it is 0",
        advice="if it serves a case this run never meets (a first step's placeholder that "
        "a multi-start decoder never reaches, a padding row), nothing is wrong: freeze it "
        "with requires_grad_(False) to say so; otherwise check the condition of that "
        "torch.where, which never selects it",
        evidence=(
            *finding.evidence,
            f"torch.where, branch never chosen, lies between {name} and the loss",
        ),
    )


def _times_zero(finding: Finding, name: str, head: str, library: str = "") -> Finding:
    """The zeros of a tensor multiplied by a constant 0. Written by an installed library
    (brevitas's runtime-stats scaling, while it collects statistics), its own design:
    information. Written by the script, a term switched off that may be meant or not: the
    warning stays, naming the product."""
    said = (
        f": {library} writes it so, the library's own placeholder (as brevitas's runtime-stats "
        "scaling does for its first collect_stats_steps steps, while it collects statistics)"
    )
    return replace(
        finding,
        severity=Severity.INFO if library else finding.severity,
        message=f"{head}: it reaches the loss only through {TIMES_ZERO} (`0. * x`), which "
        "keeps it in the graph and hands it exact zeros" + (said if library else ""),
        advice=(
            "nothing to fix: the library's placeholder learns once it is initialised (a run "
            "longer than its calibration)"
            if library
            else "find the factor that is 0 (a loss weight, a mask, a gate set to 0): if the "
            "term is off on purpose, freeze what only it trains with requires_grad_(False)"
        ),
        evidence=(
            *finding.evidence,
            f"a product with the constant 0 lies between {name} and the loss",
        ),
    )


def _cancelled(finding: Finding, name: str, head: str) -> Finding:
    """The zeros of a tensor added and subtracted again: a straight-through estimator
    (soft + (hard - soft)) whose difference was not detached."""
    return replace(
        finding,
        message=f"{head}: it reaches the loss only through a sum x + (y - x), which adds a "
        "tensor and subtracts it again: its derivative in x is 1 - 1 = 0 (a straight-through "
        "estimator written without its .detach())",
        advice="detach the difference, soft + (hard - soft).detach(), so that the forward "
        "takes the hard value and the backward the soft one's gradient",
        evidence=(*finding.evidence, f"x + (y - x) lies between {name} and the loss"),
    )
