"""An optimizer's hyperparameters, read off its param groups at each step it takes.

Reading a group is a few dictionary look-ups; a history entry is kept only when
something other than the learning rate changes (the lr is in every `StepRecord`).
Decoupled decay is AdamW's (and Adam's with `decoupled_weight_decay=True`, and
optimizers whose class says so); every other `weight_decay` is added to the gradient
(L2). A device tensor lr or beta is not read (it would sync): NaN.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gradscope.steps.meaning import GroupSettings, OptimizerSettings

DECOUPLED_CLASSES = ("adamw", "lion", "adafactor", "lamb")


class SettingsHistory:
    """Per optimizer index, its settings from its first step and at every change."""

    def __init__(self) -> None:
        self.history: dict[int, list[OptimizerSettings]] = {}

    def observe(self, index: int, step: int, optimizer: Any) -> None:
        groups = tuple(group_settings(optimizer, g) for g in optimizer.param_groups)
        seen = self.history.setdefault(index, [])
        if not seen or seen[-1].groups != groups:
            seen.append(OptimizerSettings(type(optimizer).__name__, step, groups))

    def of(self, count: int) -> tuple[tuple[OptimizerSettings, ...], ...]:
        return tuple(tuple(self.history.get(i, ())) for i in range(count))


def group_settings(optimizer: Any, group: dict[str, Any]) -> GroupSettings:
    kind = type(optimizer).__name__.lower()
    decoupled = bool(group.get("decoupled_weight_decay")) or any(
        name in kind for name in DECOUPLED_CLASSES
    )
    betas = group.get("betas")
    return GroupSettings(
        lr=_number(group.get("lr")),
        weight_decay=_number(group.get("weight_decay", 0.0)) or 0.0,
        decoupled=decoupled,
        momentum=_optional(group.get("momentum")),
        betas=(
            (_number(betas[0]), _number(betas[1]))
            if isinstance(betas, (tuple, list)) and len(betas) == 2
            else None
        ),
        eps=_optional(group.get("eps")),
        maximize=bool(group.get("maximize", False)),
        nesterov=bool(group.get("nesterov", False)),
    )


def _number(value: Any) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.device.type != "cpu":
            return math.nan
        return float(value.item())
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _optional(value: Any) -> float | None:
    return None if value is None else _number(value)
