"""An optimizer's hyperparameters, read off its param groups at each step it takes.

Reading a group is a few dictionary look-ups; a history entry is kept only when
something other than the learning rate changes (the lr is in every `StepRecord`).
Whether a decay is decoupled (AdamW's) or added to the gradient (L2) is what
optim_known knows of the class; None where it does not. A device tensor lr or beta is
not read (it would sync): NaN.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from gradscope.steps.meaning import GroupSettings, OptimizerSettings
from gradscope.watcher import optim_known
from gradscope.watcher.added_noise import added_noise

KEYS = (
    "weight_decay",
    "momentum",
    "betas",
    "eps",
    "maximize",
    "nesterov",
    "decoupled_weight_decay",
)
"""What a change is looked for in at every step (the lr is in every StepRecord)."""


class SettingsHistory:
    """Per optimizer index, its settings from its first step and at every change."""

    def __init__(self) -> None:
        self.history: dict[int, list[OptimizerSettings]] = {}
        self._last: dict[int, tuple[Any, ...]] = {}
        """Per optimizer index, the raw values last seen: a step compares them only."""
        self._states: dict[int, int] = {}
        """Per optimizer index, the id of its `state` dict at its last step."""
        self.loaded: dict[int, list[int]] = {}
        """Per optimizer index, the steps before which its state was loaded whole."""

    def observe(self, index: int, step: int, optimizer: Any) -> None:
        self._note_loaded(index, step, optimizer)
        raw = tuple(_raw(g.get(k)) for g in optimizer.param_groups for k in KEYS)
        if self._last.get(index) == raw:
            return
        self._last[index] = raw
        groups = tuple(group_settings(optimizer, g) for g in optimizer.param_groups)
        seen = self.history.setdefault(index, [])
        if not seen or seen[-1].groups != groups:
            kind = type(optimizer).__name__
            update = optim_known.update(optimizer)
            seen.append(OptimizerSettings(kind, step, groups, update, added_noise(optimizer)))

    def of(self, count: int) -> tuple[tuple[OptimizerSettings, ...], ...]:
        return tuple(tuple(self.history.get(i, ())) for i in range(count))

    def loaded_of(self, count: int) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(self.loaded.get(i, ())) for i in range(count))

    def _note_loaded(self, index: int, step: int, optimizer: Any) -> None:
        """`optimizer.load_state_dict` builds a new `state` dict (its moments and step
        counts) and new param groups (their lr) together, before the old one is freed, so
        a new id since the last step is a load: Population-Based Training's exploit, a
        rollback to a checkpoint. The lr it brings came with the moments it was used
        with."""
        now = id(getattr(optimizer, "state", None))
        before = self._states.get(index)
        self._states[index] = now
        if before is not None and before != now:
            self.loaded.setdefault(index, []).append(step)


def group_settings(optimizer: Any, group: dict[str, Any]) -> GroupSettings:
    betas = group.get("betas")
    return GroupSettings(
        lr=_number(group.get("lr")),
        weight_decay=_number(group.get("weight_decay", 0.0)) or 0.0,
        decoupled=optim_known.decoupled(optimizer, group),
        momentum=_optional(group.get("momentum")),
        betas=(
            (_number(betas[0]), _number(betas[1]))
            if isinstance(betas, (tuple, list)) and len(betas) == 2
            else None
        ),
        eps=_optional(group.get("eps")),
        maximize=bool(group.get("maximize", False)),
        nesterov=bool(group.get("nesterov", False)),
        line_search=group.get("line_search_fn") is not None,
    )


def _raw(value: Any) -> Any:
    """A value fit to compare without a device read: numbers as they are, anything else
    (a tensor) by identity. Plain type checks: isinstance on torch.Tensor is slow."""
    kind = type(value)
    if value is None or kind is float or kind is int or kind is bool or kind is str:
        return value
    if kind is tuple or kind is list:
        return tuple(_raw(v) for v in value)
    return id(value)


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
