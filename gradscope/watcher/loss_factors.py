"""A weight's value on a loss's graph, read without a device sync: the number a product or a
sum saved, or a CPU tensor's (a per-sample mask counts only when all of it is 0)."""

from __future__ import annotations

import math
from typing import Any

import torch

from gradscope.autograd_walk import saved


def held(node: Any) -> Any:
    """The operand of a product that takes no gradient: `w * loss` saves the weight as
    self, `loss * mask` as other (torch saves only the operand the gradient needs)."""
    other = saved(node, "_saved_other", None)
    if other is None or (isinstance(other, torch.Tensor) and other.requires_grad):
        return saved(node, "_saved_self", None)
    return other


def constant(value: Any) -> float:
    """A factor's value: a Python number, or a CPU scalar tensor (wrapped numbers are);
    0 for a CPU tensor of per-sample weights that are all 0 (a confidence mask nothing
    passed); NaN for anything that would need a device read or is not one number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
        return math.nan
    if value.requires_grad or value.is_complex() or value.layout != torch.strided:
        return math.nan
    if value.numel() == 1:
        return float(value.item())
    plain = type(value) is torch.Tensor  # a subclass (DTensor) may reduce across ranks
    return 0.0 if plain and value.numel() and not bool(value.any()) else math.nan
