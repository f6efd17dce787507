"""Optimizers built for one task or one round: a meta-learning inner loop (Reptile's, a
MAML written with torch.optim) or a federated client's local epochs, rebuilt on a fresh
copy each time. Their whole life is a few steps inside a longer run, every step a fresh
optimizer's first; a large move per step is what they are for (few-shot adaptation), so
steady-state update ratios (GS409, GS410) and the learning rate against the weights
(GS419) are not theirs to judge. No torch."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.steps.records import WatchRun


def short_lived(run: WatchRun, t: Thresholds) -> frozenset[int]:
    """The optimizers that took from 2 to fewer than warmup-steps steps while the run went
    on before their first step or after their last: one pass over the run's steps. A run's
    only optimizer is never one (a short run is still the whole run), nor one that took a
    single step (no loop to adapt in: an optimizer re-created at every step of one loop)."""
    spans: dict[int, list[int]] = {}
    for r in run.steps:
        span = spans.setdefault(r.optimizer, [r.step, r.step, 0])
        span[1], span[2] = r.step, span[2] + 1
    if len(spans) < 2:
        return frozenset()
    first = min(start for start, _, _ in spans.values())
    last = max(end for _, end, _ in spans.values())
    return frozenset(
        k
        for k, (start, end, count) in spans.items()
        if 2 <= count < t.warmup_steps and (start > first or end < last)
    )
