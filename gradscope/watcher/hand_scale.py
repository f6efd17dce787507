"""A loss scale kept by hand (float16 training without GradScaler): the backward runs on
`loss * S`, S a power of two that a dynamic scaler halves on overflow and doubles after
good steps. The loss recorded is the value backward ran on, so each change of S would
read as the loss halving or doubling; each step's loss is put back in the scale of the
first step read (whose factor the loss's kind holds), read without a device sync."""

from __future__ import annotations

import math
from typing import Any

import torch

from gradscope.watcher import loss_factors


def factor(loss: torch.Tensor) -> float:
    """S where the loss is a product of a scalar and a constant power of two above 1 read
    on the CPU (a Python number, a CPU scalar); NaN otherwise (a weight of another kind, a
    return that the data sets, a scale on the device, and 1/K: a loss divided by K
    accumulated micro-batches, whose K may change between phases of the run)."""
    node = loss.grad_fn
    if node is None or type(node).__name__ != "MulBackward0":
        return math.nan
    value = loss_factors.constant(loss_factors.held(node))
    if not (math.isfinite(value) and value > 1):
        return math.nan
    mantissa, _ = math.frexp(value)
    return value if mantissa == 0.5 else math.nan


def in_first_scale(first: float | None, loss: torch.Tensor, value: Any) -> tuple[Any, float | None]:
    """`value` (the loss's detached value) in the scale of the first step read, and that
    first scale (set by this call where none was read yet). A constant factor leaves it
    as it is; a loss with no power-of-two factor is left as it is too."""
    scale = factor(loss)
    if math.isnan(scale):
        return value, first
    if first is None:
        return value, scale
    return (value if scale == first else value * (first / scale)), first
