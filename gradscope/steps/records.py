"""Plain data of a watched run: one record per optimizer step, and the run around them.

No torch here: the rules, reporters and the JSON document read only these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from gradscope.steps.step_store import StepStore
    from gradscope.steps.tensor_track import TensorTrack

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
    steps: Sequence[StepRecord]
    """Every step, in order: a `StepStore` (given records are stored into one)."""
    status: str
    """completed | stopped (--steps reached) | crashed (the script raised) | interrupted
    (Ctrl-C) | terminated (SIGTERM)."""
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

    def __post_init__(self) -> None:
        from gradscope.steps.step_store import StepStore

        store = self.steps if isinstance(self.steps, StepStore) else StepStore.of(self.steps)
        store.widen(len(self.params))
        object.__setattr__(self, "steps", store)

    @property
    def store(self) -> StepStore:
        """`steps` as the StepStore __post_init__ made it."""
        return cast("StepStore", self.steps)

    @property
    def tensors(self) -> TensorTrack:
        """Per-tensor facts over every step (never, or no longer, got a gradient)."""
        return self.store.track

    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def members_of(self, index: int) -> tuple[int, ...]:
        """Positions of optimizer `index`'s parameters; () when not recorded."""
        return self.members[index] if index < len(self.members) else ()

    def optimizer_label(self, index: int) -> str:
        """ "optimizer 0 (Adam, Discriminator)": its index, class and the module its
        parameters share; "manual update" for updates made by hand."""
        kind = self.optimizers[index] if index < len(self.optimizers) else "?"
        if kind == MANUAL:
            return MANUAL
        owner = _common_prefix(
            [self.params[i].name for i in self.members_of(index) if i < len(self.params)]
        )
        return f"optimizer {index} ({kind}{', ' + owner if owner else ''})"


def _common_prefix(names: list[str]) -> str:
    """The module path every name lies under ("D" for D.0.weight, D.2.bias); "" if none."""
    if not names:
        return ""
    parts = [n.split(".")[:-1] for n in names]
    common: list[str] = []
    for level in zip(*parts, strict=False):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    return ".".join(common)
