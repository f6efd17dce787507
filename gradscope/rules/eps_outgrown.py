"""Whether the gradients grew past Adam's eps after its state was last sampled (GS442). No
torch.

The eps samples are sparse (steps 1-3, 50 and 100, then every 1000th): an agent whose
gradients start tiny and grow (DreamerV3's actor under eps 1e-5, its advantages near 0 while
the reward head, zero-initialised, learns the first rewards) can end its run with every
sample under eps though its last steps are Adam's own. The gradient norm is recorded at every
step: its root mean square per element is √v̂'s typical size. Where that was under eps at the
last sample and rose above it over the run's last steps, eps no longer decides the step."""

from __future__ import annotations

import math
import statistics

from gradscope.steps.records import WatchRun

LAST = 5
"""The run's last steps of the optimizer whose median norm is read."""


def grown_past(run: WatchRun, index: int, eps: float, after: int) -> tuple[int, float] | None:
    """(the last step, the gradient's RMS per element there) where the median of the
    optimizer's last LAST norms, spread over the elements it moves, is above eps, all those
    steps after the last sampled step `after`, at which that RMS was still under eps (the
    gradients grew past it since); None otherwise."""
    records = run.store.of_optimizer(index)
    steps = [r for r in records[-LAST:] if r.step > after and _finite(r.grad_norm)]
    at = [r.grad_norm for r in records if r.step == after and _finite(r.grad_norm)]
    members = run.members_of(index) or range(len(run.params))
    size = sum(math.prod(run.params[i].shape) for i in members if i < len(run.params))
    if len(steps) < LAST or not at or not size:
        return None
    rms = statistics.median(r.grad_norm for r in steps) / math.sqrt(size)
    grew = at[0] / math.sqrt(size) <= eps < rms
    return (steps[-1].step, rms) if grew else None


def _finite(norm: float | None) -> bool:
    return norm is not None and math.isfinite(norm)
