"""A loss fed the worst case over an input box, read from its graph, and the box's radius.

Interval bound propagation (Gowal et al. 2018; CROWN-IBP; auto_LiRPA's
`interval_propagate`) carries a box's centre through a layer's W and its radius through
|W|, and certified training feeds the worst-case logits the bounds give to a
cross-entropy. The box's radius, the first layer's input to |W|, is the script's epsilon
at that step. Papers ramp it up from 0, so the objective itself changes as it grows, and
the loss's level says nothing alone (rules/switched_on.py). A parameter reached through
|W| only (a monotone network's non-negative weights) is no bound. One read of the radius
tensor (a device sync), at the graph reads only.
"""

from __future__ import annotations

from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order, inputs, saved

SEARCH = 256
"""Nodes searched from the loss: an interval pass doubles a small network's graph."""

_PRODUCTS = {
    "MmBackward0": (0, 1, "_saved_self"),
    "AddmmBackward0": (1, 2, "_saved_mat1"),
    "ConvolutionBackward0": (0, 1, "_saved_input"),
}
"""A product's input slot, weight slot, and the saved name of its input."""
_WEIGHT_VIEWS = frozenset({"TBackward0", "PermuteBackward0", "TransposeBackward0"})


def radius(loss_node: Any) -> float | None:
    """The largest entry of the box's radius that |W| carries at the first layer, where
    the same W also carries the box's centre; None where the loss is no interval bound."""
    plain: set[int] = set()
    boxes: dict[int, Any] = {}
    for node in NodeWalk([loss_node], inputs, order=Order.NEAREST, limit=SEARCH):
        slots = _PRODUCTS.get(type(node).__name__)
        if slots is None or len(node.next_functions) <= slots[1]:
            continue
        weight, absolute = _weight(node.next_functions[slots[1]][0])
        if weight is None:
            continue
        if not absolute:
            plain.add(id(weight))
        elif node.next_functions[slots[0]][0] is None:  # the box itself, no layer below
            boxes[id(weight)] = saved(node, slots[2], None)
    found = [b for w, b in boxes.items() if w in plain and isinstance(b, torch.Tensor)]
    if not found or found[0].numel() == 0:
        return None
    return float(found[0].detach().abs().amax())


def _weight(node: Any) -> tuple[Any, bool]:
    """The parameter under a product's weight input, and whether the product took its
    absolute value."""
    while node is not None and type(node).__name__ in _WEIGHT_VIEWS:
        node = node.next_functions[0][0]
    absolute = node is not None and type(node).__name__ == "AbsBackward0"
    if absolute:
        node = node.next_functions[0][0]
    variable = getattr(node, "variable", None)
    return (variable, absolute) if isinstance(variable, torch.Tensor) else (None, False)
