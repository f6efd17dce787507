"""What the watch keeps per optimizer, in one record (`OptimizerWatch`) that
`WatchState.of(optimizer)` hands out: the patches of a step, a zero_grad and a backward
each read a part of it, and one record per optimizer keeps those parts from drifting
apart (an optimizer counted by one and missing from another). The stand-in of updates by
hand (manual_search.ManualUpdates) has one too."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import torch

_opened = itertools.count()


@dataclass
class OpenReset:
    """Since an optimizer's last step: a reset of its gradients seen, or the norms of
    its gradients found at the start of each backward of the thread that stepped it
    (the carried-over norm of its next step: resets.py)."""

    params: list[torch.Tensor]
    thread: int
    reset: bool = False
    low: torch.Tensor | None = None
    """The smallest norm of its gradients found at a backward's start (one tensor, not one
    a backward: an optimizer the script dropped keeps its entry open for good)."""
    marks: list[tuple[int, int]] = field(default_factory=list)
    """(id, version) of the gradients last measured: unchanged, they need no new norm."""
    held: list[Any] = field(default_factory=list)
    """Weak references to the gradients found at the first backward's start: none of them
    in `.grad` at the step, they were set to None or replaced by hand since (resets.py)."""
    opened: int = field(default_factory=lambda: next(_opened))
    """Its place in the order of the steps that opened them (`WatchState.open_resets`)."""


@dataclass
class OptimizerWatch:
    """One optimizer's part of the watch."""

    reset: OpenReset | None = None
    """What happened to its gradients since its last step; None: no step, or its step
    is being recorded (resets.carried)."""
    stepped_by: set[int] = field(default_factory=set)
    """The threads that stepped it: another thread's gradients are not theirs to read."""
    loss_kind: Any = None
    """The `LossKind` of its first step whose loss was read."""
    group_ids: tuple[tuple[int, ...], ...] | None = None
    """Its param groups' tensors' ids at its last step (group_swaps.swapped)."""
    members: tuple[Any, tuple[int, ...]] | None = None
    """(sizes when read, positions of its parameters among the tracked): a cache."""
    trained: tuple[tuple[int, ...], list[torch.Tensor]] | None = None
    """(its groups' sizes when read, its parameters that take gradients): a cache."""
    applied: tuple[tuple[Any, int], ...] | None = None
    """The gradients its last step applied, weakly, with their versions (reapplied.py);
    None until a step of it ran with no backward since the one before: a run whose every
    step has its own backward never reads them."""
