"""The pinball (quantile) loss read off a loss's graph: max((q - 1)·e, q·e) of one error e,
as quantile forecasters write it (`torch.max((q - 1) * errors, q * errors)`, Temporal
Fusion Transformer-like models, MQ-RNN). With one factor ≤ 0 and the other ≥ 0 at every
element the maximum is ≥ 0 whatever e holds: bounded below by 0 as an absolute error is, so
the loss entering the objective negated is the quantiles' fit maximised. Factors are read
only when they are numbers or CPU tensors (a device tensor would need a sync): unknown else."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.autograd_walk import saved

NODE = "MaximumBackward0"
KIND = "pinball"


def holds(node: Any) -> bool:
    """The node is max(a·e, b·e) of one e with constants a ≤ 0 ≤ b (or b ≤ 0 ≤ a)."""
    if type(node).__name__ != NODE:
        return False
    sides = [_scaled(child) for child, _ in node.next_functions]
    if len(sides) != 2 or any(s is None for s in sides):
        return False
    (e1, lo1, hi1), (e2, lo2, hi2) = sides  # type: ignore[misc]
    if e1 is not e2:
        return False
    return (hi1 <= 0 <= lo2) or (hi2 <= 0 <= lo1)


def _scaled(node: Any) -> tuple[Any, float, float] | None:
    """(e, the factor's least value, its greatest) for a product e·c of one tensor with
    a graph and a constant c; None for anything else."""
    if node is None or type(node).__name__ != "MulBackward0":
        return None
    edges = [child for child, _ in node.next_functions]
    if len(edges) != 2 or (edges[0] is None) == (edges[1] is None):
        return None
    constant = saved(node, "_saved_other" if edges[0] is not None else "_saved_self", None)
    if not isinstance(constant, torch.Tensor) or constant.device.type != "cpu":
        return None
    if constant.requires_grad or constant.is_complex() or constant.numel() == 0:
        return None
    return edges[0] or edges[1], float(constant.min()), float(constant.max())
