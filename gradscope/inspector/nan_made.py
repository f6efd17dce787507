"""What inspect says about where a NaN/Inf of a script's step came from, beside the op
that made it (script_live.py): the weights or the batch when no op of the forward made
it, a mean over nothing, a log or square root fed values below its domain, a logdet fed a
matrix of negative determinant, a division by an exact 0."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gradscope.fmt import listed
from gradscope.inspector.node_watch import readable


def before_the_forward(model: nn.Module) -> str:
    """NaN/Inf in the forward that no op of it made: it was in the weights or the batch."""
    named = [(n.replace("_orig_mod.", ""), p) for n, p in model.named_parameters()]
    with torch.no_grad():
        plain = [(n, readable(p.detach())) for n, p in named]
        bad = [n for n, p in plain if p is not None and not bool(torch.isfinite(p).all())]
    if bad:
        shown = listed(bad)
        return (
            "no op of this step's forward made NaN/Inf from finite inputs: the weights already "
            f"held them ({shown}), written by an earlier step: inspect that one "
            "(--step first-nonfinite)"
        )
    return (
        "no op of this step's forward made NaN/Inf from finite inputs: they came in with its "
        "inputs (the batch, or a tensor kept from an earlier step)"
    )


OF_NOTHING = (
    ", all of them empty: a mean over no elements (0/0), a selection that held nothing in "
    "this batch (no positive cell or object, every target ignored); add that term only when "
    "it has elements (if mask.any()), as a clamp or an epsilon cannot fix it"
)


DOMAIN_FLOOR = {"log": 0.0, "log2": 0.0, "log10": 0.0, "sqrt": 0.0, "rsqrt": 0.0, "log1p": -1.0}
"""Ops whose input below this value makes NaN, not a mere 0 or an overflow."""
NEGATIVE = (
    ", some of them below its domain (negative): what must be positive is best made so by "
    "construction (softplus or exp of a scale or variance a layer outputs), as a clamp to a "
    "floor stops the gradient of every value below it"
)


def below_domain(op: str, inputs: list[Any]) -> bool:
    """A log or square root (or log1p below -1) fed values under its domain: read once, at
    the op already found to make the first NaN."""
    floor = DOMAIN_FLOOR.get(op)
    if floor is None or len(inputs) != 1 or inputs[0].is_complex():
        return False
    return bool((inputs[0] < floor).any())


DIVISOR_AT = {
    "div": 1,
    "true_divide": 1,
    "__truediv__": 1,
    "__rtruediv__": 0,
    "__rdiv__": 0,
    "reciprocal": 0,
}
"""Division ops and which of their tensor inputs is the divisor."""
ZERO_DIVISOR = (
    ", its divisor held zeros: a weight such as 1/t or 1/sigma at the end of its range (a "
    "time or noise level sampled at exactly 0), or a count that came out 0; keep the divisor "
    "away from 0 where it is drawn (t = eps + (1 - eps) * u, or a clamp(min=eps) on it)"
)


NEGATIVE_DETERMINANT = (
    ", its matrix's determinant is negative: logdet is NaN there, and a real invertible "
    "matrix's determinant has either sign (a weight initialised orthogonal by QR is -1 as "
    "often as +1, and no step crosses 0 to flip it); a flow's log|det W| is "
    "torch.linalg.slogdet(W).logabsdet, or keep det W > 0 by construction (an LU "
    "parametrisation with exp of the diagonal)"
)


def negative_determinant(op: str, inputs: list[Any]) -> bool:
    """A logdet fed a real matrix whose determinant is below 0 (read once, at the op
    already found to make the first NaN)."""
    if op != "logdet" or len(inputs) != 1 or inputs[0].is_complex():
        return False
    return bool((torch.linalg.det(inputs[0].detach()) < 0).any())


def domain_note(op: str, inputs: list[Any]) -> str:
    """Why the op found to make the first NaN/Inf did, from its inputs (read once): a log
    fed negative values, a logdet a matrix of negative determinant, or a division by an
    exact 0; else nothing."""
    if below_domain(op, inputs):
        return NEGATIVE
    if negative_determinant(op, inputs):
        return NEGATIVE_DETERMINANT
    at = DIVISOR_AT.get(op, DIVISOR_AT.get(op.removesuffix("_")))  # div_ in place
    divisor = inputs[at] if at is not None and len(inputs) > at else None
    if divisor is not None and not divisor.is_complex() and bool((divisor == 0).any()):
        return ZERO_DIVISOR
    return ""
