"""The scalar series every sink writes, per optimizer (at most ten: the hygiene rule is
about a dozen series per run and optimizer, plus one heatmap, never one per parameter):

loss, grad_norm/total (before clipping, unscaled), grad_norm/clipped, clip_fraction (of
the steps so far), lr (first param group), loss_scale, update_norm (sampled steps),
skipped_steps (so far), nonfinite_grads (tensors whose gradient norm is NaN or inf this
step), noise_scale/b_simple (smoothed, where micro-batches were measured).

With several optimizers each has its own `optimizer N/` prefix (a GAN's two losses are
different quantities), decided at the first read-back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gradscope.steps.noise import Smoother

if TYPE_CHECKING:
    from gradscope.steps.step_record import StepRecord

Points = list[tuple[int, dict[str, float]]]
"""A read-back's series: (step, {tag: value}) per step, what every sink writes."""

SERIES = (
    "loss",
    "grad_norm/total",
    "grad_norm/clipped",
    "clip_fraction",
    "lr",
    "loss_scale",
    "update_norm",
    "skipped_steps",
    "nonfinite_grads",
    "noise_scale/b_simple",
)


@dataclass
class _Counts:
    steps: int = 0
    clipped: int = 0
    skipped: int = 0
    noise: Smoother = field(default_factory=Smoother)


class Series:
    """Each step's scalars by tag, counting across read-backs (clip fraction, skips)."""

    def __init__(self) -> None:
        self.several: bool | None = None
        self._counts: dict[int, _Counts] = {}

    def of(self, records: list[StepRecord]) -> Points:
        """(step, {tag: value}) per record, None values left out."""
        if self.several is None and records:
            self.several = any(r.optimizer > 0 for r in records)
        return [(r.step, self._scalars(r)) for r in records]

    def _scalars(self, r: StepRecord) -> dict[str, float]:
        counts = self._counts.setdefault(r.optimizer, _Counts())
        counts.steps += 1
        counts.clipped += r.clipped
        counts.skipped += r.skipped
        point = counts.noise.add(r) if r.micro_batches > 1 else None
        nonfinite = sum(1 for n in r.param_norms if n is not None and not math.isfinite(n))
        numbers = (
            r.loss,
            r.grad_norm,
            r.clipped_norm,
            counts.clipped / counts.steps,
            r.lrs[0] if r.lrs else None,
            r.scale,
            r.update_norm,
            counts.skipped,
            nonfinite,
            point.b_simple if point is not None else None,
        )
        values = dict(zip(SERIES, numbers, strict=True))
        prefix = f"optimizer {r.optimizer}/" if self.several or r.optimizer > 0 else ""
        return {prefix + tag: float(v) for tag, v in values.items() if v is not None}
