"""One optimizer step of a watched run, as the rules and reporters read it.

Below the store that keeps the steps (step_store.py) and the run that holds the store
(records.py). No torch here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

INPUT_EVERY = 16
"""Steps of several backward calls are walked for an input's gradient (`input_added`) at
steps 1-3 and every INPUT_EVERY-th: a walk of the first call's graph each."""


def input_checked(step: int) -> bool:
    return step <= 3 or step % INPUT_EVERY == 0


@dataclass(frozen=True)
class StepRecord:
    """What one optimizer step looked like, read back from the device in batches."""

    step: int
    """1-based count of optimizer steps (skipped AMP steps included)."""
    optimizer: int
    """Index of the optimizer (in order of first step) that stepped."""
    loss: float | None
    """Sum of the (unscaled) values `backward` ran on since the previous step; with
    `optimizer.step(closure)`, the closure's first return. None when backward was given
    explicit gradient weights."""
    grad_norm: float
    """Total gradient L2 norm before clipping, unscaled, of the stepping optimizer's
    parameters (`WatchRun.members`), accumulated in float64. When the script clipped
    the same parameters with norm_type 2 it equals clip_grad_norm_'s return (which is
    kept in `clip_total`)."""
    clipped_norm: float | None
    """Total L2 norm after clipping; None when the script did not clip this step."""
    max_norm: float | None
    """The max_norm the script clipped to."""
    lrs: tuple[float, ...]
    """Learning rate of each param group of the stepping optimizer."""
    backward_calls: int
    """backward() calls since the previous step (> 1: gradient accumulation); with a
    closure, those up to the end of its first evaluation (LBFGS's re-evaluations are
    not accumulation)."""
    scale: float | None
    """GradScaler's loss scale used for this step; None without an enabled scaler."""
    skipped: bool
    """GradScaler found Inf/NaN and skipped the parameter update."""
    carried_norm: float | None
    """For this optimizer's parameters: the smallest gradient norm found at the start of
    a backward since its previous step (> 0: they were never reset, by zero_grad() or
    to None, in between); None at its first step, or when a reset was seen."""
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
    clip_total: float | None = None
    """The script's own total norm (clip_grad_norm_'s or get_total_norm's return, in
    `norm_type`), unscaled; None when it computed none."""
    norm_type: float | None = None
    """The norm the script clipped by (2.0, inf, ...); None when it did not clip."""
    clip_scale: float | None = None
    """With `scaled_clip`: the loss scale the clipped gradients were multiplied by (the
    clip compared `clip_total * clip_scale` with max_norm)."""
    zeroed: bool = False
    """zero_grad ran after this step's backward calls and before the step: the update
    applied none of their gradients (GS422)."""
    wiped: int | None = None
    """The first `wiped` backward calls of the step had their gradients cleared (by
    zero_grad, or set to None) before its later calls: the update applied only the
    rest (GS435). None: none were."""
    rewritten: bool = False
    """With `wiped`: the script assigned `.grad` a new tensor after the step's last backward
    call (simulated workers' gradients read between resets, then combined into it)."""
    input_added: bool = False
    """The step's first backward call gave an input (a leaf no optimizer holds) its
    gradient, its last did not, and no reset came between: the update applied the
    parameter gradients of calls made for the input (an attack's, GS455). Walked only at
    the steps `input_checked` names: False at the others."""
    reapplied: bool = False
    """No backward ran since the optimizer's previous step and its `.grad` held the very
    gradients that step applied, untouched: the update applied them again (GS472)."""
    written: bool = False
    """An optimizer wrapper assigned the gradients the update applied from a buffer of
    its own, inside its step (a differentially private optimizer's clipped, noised sum):
    not what the step's backward calls left in `.grad`."""
    detail: bool = True
    """param_norms and update_ratios are this step's; False where a long run's report
    did not keep them (empty and None then: see step_store.py; the --log has them)."""
    micro_batches: int = 0
    """K: the micro-batch gradients (backward calls, over every data-parallel rank) whose
    norms were measured before they were summed into this step's gradient; 0: none
    (steps/noise.py)."""
    micro_sq: float | None = None
    """The mean over those K gradients of |g_j|², each scaled so that their mean is the
    step's gradient (the stepping optimizer's parameters): the small-batch squared norm
    of the noise scale. None: not measured."""
    batch_samples: int | None = None
    """Samples in one micro-batch (the inputs' leading dimension, or as stated)."""
    micro_param_sq: tuple[float, ...] = ()
    """Per tracked parameter, its part of `micro_sq` (-1: none): read by the store's
    per-layer noise scale, not kept."""

    @classmethod
    def stored(cls, fields: dict[str, Any]) -> StepRecord:
        """A record from a store's values (every field given), built ten times faster than
        by `__init__`, whose frozen assignments dominate reading a long run back."""
        record = object.__new__(cls)
        record.__dict__.update(fields)
        return record

    @property
    def clipped(self) -> bool:
        """The script's clip scaled the gradients down (its total, in its norm and as
        the clip saw it, above max_norm)."""
        if self.max_norm is None:
            return False
        seen = self.grad_norm if self.clip_total is None else self.clip_total
        if self.scaled_clip and self.clip_scale is not None:
            seen *= self.clip_scale
        return math.isfinite(seen) and seen > self.max_norm

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
            "clip_total": self.clip_total,
            "norm_type": self.norm_type,
            "clip_scale": self.clip_scale,
            "zeroed": self.zeroed,
            "wiped": self.wiped,
            "rewritten": self.rewritten,
            "input_added": self.input_added,
            "reapplied": self.reapplied,
            "written": self.written,
            "micro_batches": self.micro_batches,
            "micro_sq": self.micro_sq,
            "batch_samples": self.batch_samples,
        }
        if series:
            out["param_norms"] = list(self.param_norms) if self.detail else None
            out["update_ratios"] = (
                None
                if self.update_ratios is None
                else [None if math.isnan(v) else v for v in self.update_ratios]
            )
        return out


def steps_by_optimizer(steps: Iterable[StepRecord]) -> dict[int, list[StepRecord]]:
    """Each optimizer's steps, in one pass (a run's records are built as they are read: a
    pass per optimizer builds them all once per optimizer, and a meta-learning run makes
    hundreds)."""
    own: dict[int, list[StepRecord]] = {}
    for r in steps:
        own.setdefault(r.optimizer, []).append(r)
    return own
