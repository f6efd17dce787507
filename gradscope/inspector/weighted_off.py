"""Parameters the loss reaches only through a term multiplied by a constant zero: a loss
weight that is 0 at this step (VQGAN's GAN term before its discriminator starts, a KL weight
warmed up from 0). Their gradient is all zeros by the schedule, not by a dead layer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradscope.autograd_walk import NodeWalk, inputs, saved
from gradscope.inspector.script_facts import constant_factor

LIMIT = 200_000
"""Nodes walked at most (a graph larger than this is not read: nothing is explained)."""


def names(
    model: nn.Module, loss: torch.Tensor, passes_none: Callable[[Any], bool] | None = None
) -> tuple[str, ...]:
    """Parameters of `model` that every path from `loss` reaches through a zero weight (or
    through a node `passes_none` says passes no gradient); read before the backward frees
    the saved operands."""
    frozen = frozen_storages(model)
    blocked = passes_none or (lambda node: _zero_weight(node, frozen))
    root = loss.grad_fn
    if root is None:
        return ()
    off: list[Any] = []

    def live_below(node: Any) -> list[Any]:
        if blocked(node):
            off.append(node)
            return []
        return inputs(node)

    live = _leaves(NodeWalk([root], live_below, limit=LIMIT))
    behind = _leaves(NodeWalk(off, limit=LIMIT)) if off and live is not None else None
    if live is None or behind is None:
        return ()
    return tuple(name for name, p in model.named_parameters() if id(p) in behind - live)


def _leaves(walk: NodeWalk[Any]) -> set[int] | None:
    """The leaf tensors the walk reached; None where the bound cut it short."""
    found = {id(n.variable) for n in walk if hasattr(n, "variable")}
    return None if walk.pending else found


def frozen_storages(model: nn.Module) -> dict[int, str]:
    """Frozen parameters by storage: a zero one a product reads is a gate that never moves
    (zero_gates.py), not a loss weight off at this step."""
    named = model.named_parameters()
    return {p.data_ptr(): n for n, p in named if not p.requires_grad and p.numel()}


def _zero_weight(node: Any, frozen: dict[int, str]) -> bool:
    if not node.name().startswith("MulBackward"):
        return False
    try:
        if constant_factor(node, dividing=False) != 0.0:
            return False
        operands = [saved(node, k) for k in ("_saved_self", "_saved_other")]
    except RuntimeError:  # its saved operands already freed
        return False
    return not any(isinstance(x, torch.Tensor) and x.data_ptr() in frozen for x in operands)
