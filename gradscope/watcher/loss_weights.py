"""The positions a per-position cross-entropy keeps after it: a loss taken with
reduction='none' and then weighted by a mask (`(nll * mask).sum()`, as the Transformer
Hawkes process and many taggers weigh padded events out) or filled where it does not count
(`nll.masked_fill(~mask, 0)`). A position weighted by 0 gives the model no gradient: it is
not trained, whatever its target reads (target_leak.py, padding.py)."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order, saved

NEAR = 16
"""Nodes below the loss searched for a weighting of the cross-entropy's output."""
VIEWS = frozenset(
    {
        "ViewBackward0",
        "UnsafeViewBackward0",
        "ReshapeAliasBackward0",
        "SqueezeBackward0",
        "SqueezeBackward1",
        "UnsqueezeBackward0",
    }
)


def kept_positions(root: Any, nll: Any, target: torch.Tensor) -> torch.Tensor | None:
    """A device bool shaped like `target`: the positions no weighting right after `nll`
    zeroes; None where none is found."""
    keep: torch.Tensor | None = None
    for node in NodeWalk([root], order=Order.NEAREST, limit=NEAR):
        found = _weighted(node, nll, target)
        if found is not None:
            keep = found if keep is None else keep & found
    return keep


def _weighted(node: Any, nll: Any, target: torch.Tensor) -> torch.Tensor | None:
    nexts = [_under_views(n) for n, _ in getattr(node, "next_functions", ())]
    if not any(n is nll for n in nexts):
        return None
    side = next(i for i, n in enumerate(nexts) if n is nll)
    name = type(node).__name__
    if name == "MulBackward0" and side < 2:
        weight = saved(node, "_saved_other" if side == 0 else "_saved_self", None)
        if isinstance(weight, torch.Tensor) and not weight.requires_grad:
            return _shaped(weight.detach() != 0, target)
    if name == "MaskedFillBackward0" and side == 0:
        mask = saved(node, "_saved_mask", None)
        if isinstance(mask, torch.Tensor):
            return _shaped(~mask.detach().bool(), target)
    return None


def _under_views(node: Any) -> Any:
    while node is not None and type(node).__name__ in VIEWS:
        nexts = getattr(node, "next_functions", ())
        node = nexts[0][0] if nexts else None
    return node


def _shaped(keep: torch.Tensor, target: torch.Tensor) -> torch.Tensor | None:
    if keep.numel() != target.numel() or keep.device != target.device:
        return None
    return keep.reshape(target.shape)
