"""Plain data of a watched run: one record per optimizer step, and the run around them.

No torch here: the rules, reporters and the JSON document read only these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

MANUAL = "manual update"
"""The name in `WatchRun.optimizers` of parameter updates made by hand (no optimizer:
`p.data.add_(p.grad, alpha=-lr)`), each judged as a step."""


@dataclass(frozen=True)
class StepRecord:
    """What one optimizer step looked like, read back from the device in batches."""

    step: int
    """1-based count of optimizer steps (skipped AMP steps included)."""
    optimizer: int
    """Index of the optimizer (in order of first step) that stepped."""
    loss: float | None
    """Sum of the (unscaled) values `backward` ran on since the previous step; None when
    backward was given explicit gradient weights."""
    grad_norm: float
    """Total gradient L2 norm before clipping, unscaled (clip_grad_norm_'s return when the
    script clipped)."""
    clipped_norm: float | None
    """Total norm after clipping; None when the script did not clip this step."""
    max_norm: float | None
    """The max_norm the script clipped to."""
    lrs: tuple[float, ...]
    """Learning rate of each param group of the stepping optimizer."""
    backward_calls: int
    """backward() calls since the previous step (> 1: gradient accumulation)."""
    scale: float | None
    """GradScaler's loss scale used for this step; None without an enabled scaler."""
    skipped: bool
    """GradScaler found Inf/NaN and skipped the parameter update."""
    carried_norm: float | None
    """Norm of the gradients already present when this step's first backward ran
    (> 0: they were not reset after the previous step); None when all were None."""
    param_norms: tuple[float | None, ...]
    """Per tracked parameter, its gradient norm before clipping, unscaled; None where grad
    was None (NaN or inf where the gradient held them)."""
    update_ratios: tuple[float, ...] | None = None
    """Sampled steps only: per parameter ‖Δw‖/‖w‖ of the update; NaN where not measured."""
    update_norm: float | None = None
    """Sampled steps only: the total L2 norm of the update."""
    time_s: float = 0.0
    """Seconds since the watch started, at the end of the step."""
    scaled_clip: bool = False
    """The script clipped while the gradients were still multiplied by GradScaler's
    scale (no `unscale_` since the scaled backward). grad_norm and param_norms are
    unscaled all the same."""

    @property
    def clipped(self) -> bool:
        return (
            self.max_norm is not None
            and math.isfinite(self.grad_norm)
            and (self.grad_norm > self.max_norm)
        )

    def to_dict(self, series: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "optimizer": self.optimizer,
            "loss": self.loss,
            "grad_norm": self.grad_norm,
            "clipped_norm": self.clipped_norm,
            "max_norm": self.max_norm,
            "clipped": self.clipped,
            "lrs": list(self.lrs),
            "backward_calls": self.backward_calls,
            "scale": self.scale,
            "skipped": self.skipped,
            "carried_norm": self.carried_norm,
            "update_norm": self.update_norm,
            "time_s": round(self.time_s, 6),
            "scaled_clip": self.scaled_clip,
        }
        if series:
            out["param_norms"] = list(self.param_norms)
            out["update_ratios"] = (
                None
                if self.update_ratios is None
                else [None if math.isnan(v) else v for v in self.update_ratios]
            )
        return out


@dataclass(frozen=True)
class ParamInfo:
    """A parameter gradscope tracked, and how the optimizers see it."""

    name: str
    shape: tuple[int, ...]
    requires_grad: bool
    in_optimizer: bool
    """False: it is in no param group of any optimizer, so nothing ever updates it."""
    lr: float | None
    """Learning rate of its param group at the last step (None: not in an optimizer)."""


@dataclass(frozen=True)
class WatchRun:
    """Everything recorded about one run: the rules' only input."""

    label: str
    params: tuple[ParamInfo, ...]
    steps: tuple[StepRecord, ...]
    status: str
    """completed | stopped (--steps reached) | crashed (the script raised) | interrupted."""
    duration_s: float
    error: str | None = None
    """The script's exception in one line, when it crashed."""
    optimizers: tuple[str, ...] = ()
    """Class names of the optimizers that stepped, by index (`MANUAL` for updates made
    by hand)."""
    members: tuple[tuple[int, ...], ...] = ()
    """Per optimizer index, the positions in `params` of the parameters it steps."""
    backward_calls: int = 0
    """backward() calls seen in the whole run, with or without a step after them."""
    traceback: str | None = None
    """When it crashed: the script's traceback as Python prints it, gradscope's frames
    hidden."""
    update_every: int = 25
    """Every this many steps the update/weight ratios were sampled."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def names(self) -> list[str]:
        return [p.name for p in self.params]
