"""Parameters the loss reaches only through a product with a parameter that is all zeros: a
gate. ReZero's `x + alpha * F(x)` and Flamingo's `tanh(alpha) * xattn(x)` start with alpha = 0,
so nothing flows into the branch until the first step moves alpha: by design. The same gate
frozen (requires_grad=False) never moves: the branch never learns. Read in the graph, from the
product's saved operands, whatever the gate is called and whichever module owns it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from gradscope.autograd_walk import saved
from gradscope.inspector import weighted_off

PASS_THROUGH = ("View", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Tanh", "Clone", "ToCopy")
"""Nodes between a gate and its product that keep a zero a zero (a view, tanh(0) = 0)."""


@dataclass(frozen=True)
class ZeroGates:
    """What a zero gate blocks at this step, by the gate's kind."""

    zero_gated: tuple[str, ...] = ()
    """Reached only through trainable zero gates (they move at the first step)."""
    zero_gates: tuple[str, ...] = ()
    frozen_gated: tuple[str, ...] = ()
    """Reached only through frozen zero gates (no step moves them)."""
    frozen_gates: tuple[str, ...] = ()


def read(model: nn.Module, loss: torch.Tensor) -> ZeroGates:
    """Read before the backward frees the saved operands."""
    named = list(model.named_parameters())
    if loss.grad_fn is None or not _any_zero([p for _, p in named]):
        return ZeroGates()
    trainable: dict[int, str] = {}
    frozen: dict[int, str] = {}
    frozen_ptrs = weighted_off.frozen_storages(model)
    names = {id(p): n for n, p in named}

    def trainable_gate(node: Any) -> bool:
        return _gate(node, lambda slot, _x: _param_behind(slot, names), trainable)

    def frozen_gate(node: Any) -> bool:
        return _gate(node, lambda slot, x: _frozen(slot, x, frozen_ptrs), frozen)

    behind = weighted_off.names(model, loss, trainable_gate)
    behind_frozen = weighted_off.names(model, loss, frozen_gate)
    gates, frozen_names = set(trainable.values()), set(frozen.values())
    return ZeroGates(
        tuple(n for n in behind if n not in gates),
        tuple(sorted(gates)),
        tuple(n for n in behind_frozen if n not in frozen_names),
        tuple(sorted(frozen_names)),
    )


def _any_zero(params: list[torch.Tensor]) -> bool:
    """Some parameter is all zeros: one fused norm per device and dtype, one read-back."""
    kept = [p.detach() for p in params if p.numel() and _normed(p)]
    if not kept:
        return False
    with torch.no_grad():
        norms = torch._foreach_norm(kept)
        devices = {n.device for n in norms}
        return any(
            bool(torch.stack([n.float() for n in norms if n.device == d]).eq(0).any())
            for d in devices
        )


def _normed(p: torch.Tensor) -> bool:
    """A float of 16 bits or more (int8 and float8 weights of a quantized base have no norm)."""
    return p.is_floating_point() and p.element_size() >= 2


def _gate(node: Any, gate_name: Any, found: dict[int, str]) -> bool:
    """A product one of whose operands is a zero parameter (`gate_name` names it or None)."""
    if not node.name().startswith("MulBackward0"):
        return False
    # None: a Scalar overload, its operands freed, or saved under the script's hooks
    operands = (saved(node, "_saved_self"), saved(node, "_saved_other"))
    for (slot, _), x in zip(node.next_functions, operands, strict=False):
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            continue
        name = gate_name(slot, x)
        if name is not None and not bool(x.detach().any()):
            found[id(node)] = name
            return True
    return False


def _param_behind(slot: Any, names: dict[int, str]) -> str | None:
    """The parameter a product's operand is, through views and tanh (None: computed)."""
    while slot is not None and slot.name().startswith(PASS_THROUGH):
        nexts = [n for n, _ in slot.next_functions if n is not None]
        if len(nexts) != 1:
            return None
        slot = nexts[0]
    variable = getattr(slot, "variable", None) if slot is not None else None
    return names.get(id(variable)) if variable is not None else None


def _frozen(slot: Any, x: torch.Tensor, ptrs: dict[int, str]) -> str | None:
    """A constant operand that is a frozen parameter's own storage."""
    return ptrs.get(x.data_ptr()) if slot is None else None
