"""The step a run's loss diverged: where the lead of a precursor is measured to when the
finding that says the run diverged is a verdict on the whole run (GS415, the loss ended no
better than it started) and names no step of its own. No torch.

A gradient spike the loss comes back from is a symptom with its own lead; the divergence is
the loss's own blow-up, the step from which it stayed high until the run ended.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

WINDOW = 16
"""Steps averaged: one step's noise is no level."""
RATIO = 1.3
"""The loss's WINDOW-step mean at least this many times its lowest: diverged."""


def diverged_at(losses: Sequence[tuple[int, float]]) -> int | None:
    """The last stretch, running to the end of the run, over which the loss's WINDOW-step
    mean stayed RATIO× its lowest or more: its first step at that level (the first
    non-finite loss when there is one); None when the loss ended near its lowest or was
    never positive."""
    for step, v in losses:
        if not math.isfinite(v):
            return step
    values = [v for _, v in losses]
    means = [statistics.fmean(values[i : i + WINDOW]) for i in range(len(values) - WINDOW + 1)]
    if not means or min(means) <= 0:
        return None
    low = min(means)
    lowest = means.index(low)
    first = None
    for i in range(len(means) - 1, lowest, -1):
        if means[i] < RATIO * low:
            break
        first = i
    if first is None:
        return None
    return next(s for s, v in losses[first:] if v >= RATIO * low)
