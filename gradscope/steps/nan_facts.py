"""What watch found out about a non-finite gradient after it was read back (plain data,
no torch): the backward op that made it, or the weights it had already reached."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackwardNan:
    """The first backward node that made a non-finite gradient from finite ones, seen by
    hooks on one later backward whose weights and loss were finite."""

    seen: int
    """The first step read back with non-finite gradients and a finite loss, or the step
    GradScaler skipped before the watched one (its loss finite)."""
    step: int
    """The step whose backward the hooks watched."""
    op: str
    """The node's class name (SqrtBackward0)."""
    params: tuple[str, ...]
    """The parameters its gradient flows to, nearest first."""
    masked: bool
    """Its incoming gradient was 0 where it made NaN (0 × an infinite local derivative)."""
    passed: int
    """Later nodes that only passed the non-finite gradient on."""


@dataclass(frozen=True)
class WeightsNan:
    """Weights found non-finite after a step whose loss was finite."""

    seen: int
    """The step whose finite loss gave non-finite gradients."""
    checked: int
    """Steps done when the weights were read (they hold NaN/Inf from then at the latest)."""
    names: tuple[str, ...]
    """The non-finite tensors, in the model's order (the first few)."""
    count: int
    """How many tracked tensors were non-finite."""
