"""A loss divided by the number of things it adds up is a mean written by hand, not a loss
scaled for gradient accumulation: an exact GP's log marginal likelihood summed over its n
points then divided by n, a world model's per-step losses added over T steps then divided
by T. The count is read in the dividend's graph: a `.sum()` over n elements, or additions
of n terms (a loop's `total = total + term`), or of n per kind of term. A masked mean
(`(nll * mask).sum() / mask.sum()`, a pointer network's padded steps left out) divides by a
count the batch gives (what the mask keeps): no accumulation's constant."""

from __future__ import annotations

import math
from typing import Any

from gradscope.autograd_walk import NodeWalk, inputs, saved

LIMIT = 10_000
"""Nodes of the dividend's additions walked at most."""

_ADDING = ("AddBackward", "SubBackward")


def averages(dividend: Any, divisor: float) -> bool:
    """`dividend / divisor` divides a sum by its own number of terms or elements: a `.sum()`
    over `divisor` elements, or additions of `divisor` terms (or of as many per kind: a
    reconstruction, a reward and a KL term added over T steps each, then divided by T)."""
    if divisor < 2 or not math.isclose(divisor, round(divisor)):
        return False
    n = round(divisor)

    def below(node: Any) -> list[Any]:
        return inputs(node) if _adds(node) or _scales(node) else []

    walk = NodeWalk([dividend], below, limit=LIMIT)
    reached = list(walk)
    if walk.pending:
        return False
    terms: dict[int, int] = {}  # an addition's (or a scaling's) id -> the terms below it
    for node in reversed(reached):  # a node's inputs come after it in the walk's order
        if _summed(node) == n:
            return True
        if _adds(node) or _scales(node):
            terms[id(node)] = sum(terms.get(id(i), 1) for i in inputs(node))
    count = terms.get(id(dividend), 1)
    return count >= n and count % n == 0


def _adds(node: Any) -> bool:
    return node.name().startswith(_ADDING)


def _scales(node: Any) -> bool:
    """A term weighted by a constant (`0.5 * quad`) is still one term of the sum."""
    name = node.name()
    return name.startswith(("MulBackward", "DivBackward", "NegBackward")) and (
        len(inputs(node)) == 1
    )


def _summed(node: Any) -> int | None:
    """The number of elements a `.sum()` node adds up (None: not a full sum)."""
    if node.name() != "SumBackward0":
        return None
    try:
        sizes = node._saved_self_sym_sizes
    except (AttributeError, RuntimeError):
        return None
    return math.prod(int(s) for s in sizes)


def masked(dividend: Any, divisor: float) -> bool:
    """`dividend / divisor` with the dividend a `.sum()` of a product with a tensor that
    carries no gradient (the mask) and the divisor what that mask keeps (its sum, or the
    count of its nonzeros): a mean over the mask's elements, whose count the batch gives."""
    if _summed(dividend) is None or (_summed(dividend) or 0) < divisor:
        return False
    below = inputs(dividend)
    if len(below) != 1 or not below[0].name().startswith("MulBackward"):
        return False
    product = below[0]
    if len(inputs(product)) != 1:
        return False
    slot = "_saved_other" if product.next_functions[0][0] is not None else "_saved_self"
    try:
        mask: Any = saved(product, slot)
    except RuntimeError:  # freed by a backward
        return False
    if mask is None or not callable(getattr(mask, "numel", None)) or mask.numel() < 2:
        return False  # a number: a scaling, not a mask
    kept = (float(mask.detach().sum()), float(mask.detach().count_nonzero()))
    return any(math.isclose(divisor, k) for k in kept)  # over what the mask keeps
