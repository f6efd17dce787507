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
"""The loss's last WINDOW-step mean at least this many times its lowest: it diverged."""


def diverged_at(losses: Sequence[tuple[int, float]]) -> int | None:
    """Where a loss that ended RATIO× its lowest WINDOW-step mean or more blew up: the
    last stretch, running to the end of the run, over which its WINDOW-step mean stayed
    above halfway from its lowest to its end, at its first step above that line (the
    first non-finite loss when there is one); None when the loss ended near its lowest or
    was never positive. Halfway, not a fixed ratio: a loss that jumps at step 100 to just
    under any ratio and creeps over it by the end diverged at 100."""
    for step, v in losses:
        if not math.isfinite(v):
            return step
    values = [v for _, v in losses]
    means = [statistics.fmean(values[i : i + WINDOW]) for i in range(len(values) - WINDOW + 1)]
    if not means or min(means) <= 0 or means[-1] < RATIO * min(means):
        return None
    low = min(means)
    line = (low + means[-1]) / 2
    first = len(means) - 1
    while first > means.index(low) + 1 and means[first - 1] > line:
        first -= 1
    return next(s for s, v in losses[first:] if v > line)
