"""A gradient norm that moved to a new, noisy level while the loss fell (GS403, GS451):
a likelihood whose learned scale sharpens (a Gaussian NLL's gradient grows as 1/sigma² as sigma
shrinks; a Laplace or Student-t NLL, a mixture density net), an ensemble's log-variance
tightening. The rolling median lags such a trend by its whole window, so the new level's
ordinary steps read as spikes against the old one; judged against its neighbours a step
of the new level is none. A corrupted batch stands far above its neighbours too. No torch."""

from __future__ import annotations

import math
import statistics

from gradscope.config import Thresholds
from gradscope.fmt import num
from gradscope.rules.spikes_by_design import RECOVERY_STEPS, Spike
from gradscope.rules.step_common import MAD_SIGMA, Series, finite
from gradscope.steps.records import StepRecord


def in_new_level(
    s: Series, steps: list[StepRecord], values: list[float], spike: Spike, t: Thresholds
) -> bool:
    """The norm at the spike's index sits in a level its neighbours (the 2 × RECOVERY_STEPS
    steps either side, at least 2 × RECOVERY_STEPS of them: longer than a spike by design
    lasts, a game's turn or a moving target's jump) share: their median is itself spike-min-ratio
    times the rolling median it jumped from (the level moved), and the value is no spike
    against them by the spike test (spike-sigma robust sigmas of their log spread and
    spike-min-ratio over their median); the loss of those steps is below the loss of as many
    steps before them (it fell while the norm rose: no blow-up), and
    nothing is non-finite from there to the run's end (a rise that ended in NaN blew up)."""
    lo, hi = _shared_level(values, spike, t)
    if lo < 0 or not _finite_from(s, steps[lo]):
        return False
    during = [r.loss for r in steps[lo:hi] if r.loss is not None]
    before = [r.loss for r in steps[max(0, lo - 2 * RECOVERY_STEPS) : lo] if r.loss is not None]
    return bool(during) and bool(before) and statistics.median(during) < statistics.median(before)


def loss_in_level(
    s: Series, steps: list[StepRecord], values: list[float], spike: Spike, t: Thresholds
) -> bool:
    """The loss at the spike's index is no spike against its neighbours (as in_new_level,
    by the spike test on the 2 × RECOVERY_STEPS steps either side), the loss held the level
    (the median of the next 4 × RECOVERY_STEPS steps, at least RECOVERY_STEPS of them, at
    least half the value: a burst's steps come back within them) and nothing is non-finite
    from there on: a climb the rolling median lags, not a jump (a burst of them) that comes
    back. Asked only of a loss whose level says nothing alone (step_common.trend_doubt): a
    VQ-VAE's terms that pull two trained tensors together, a moving target's."""
    i, value, _ = spike
    after = values[i + 1 : i + 1 + 4 * RECOVERY_STEPS]
    if len(after) < RECOVERY_STEPS or statistics.median(after) < value / 2:
        return False
    lo, _ = _shared_level(values, spike, t, moved=False)
    return lo >= 0 and _finite_from(s, steps[lo])


def _shared_level(
    values: list[float], spike: Spike, t: Thresholds, moved: bool = True
) -> tuple[int, int]:
    """The neighbours' span (lo, hi) when the value sits in a level they share (and, if
    `moved`, the level is spike-min-ratio times the rolling median it jumped from);
    (-1, -1) otherwise."""
    i, value, med = spike
    reach = 2 * RECOVERY_STEPS
    lo, hi = max(0, i - reach), min(len(values), i + 1 + reach)
    near = values[lo:i] + values[i + 1 : hi]
    if len(near) < reach or min(near) <= 0 or value <= 0 or med <= 0:
        return -1, -1
    logs = [math.log(v) for v in near]
    level = statistics.median(logs)
    sigma = MAD_SIGMA * statistics.median(abs(x - level) for x in logs)
    jump = math.log(value) - level
    if (moved and level - math.log(med) < math.log(t.spike_min_ratio)) or (
        jump > t.spike_sigma * sigma and jump > math.log(t.spike_min_ratio)
    ):
        return -1, -1
    return lo, hi


def _finite_from(s: Series, first: StepRecord) -> bool:
    """No loss or gradient norm is non-finite after `first` (a rise that ended in NaN)."""
    later = [r for r in s.live() if r.step > first.step]
    return all(finite(r.grad_norm) and (r.loss is None or finite(r.loss)) for r in later)


def interleaved(s: Series) -> bool:
    """The series' steps leave room for another optimizer's (a game's players take turns):
    its spikes are judged whole, as turns (spikes_by_design.opponent_moved), none left out."""
    return any(b.step - a.step > 1 for a, b in zip(s.steps, s.steps[1:], strict=False))


def moved_level(steps: list[StepRecord], spike: Spike, t: Thresholds) -> str:
    """What a spike was told against, for the message: the steps before it in the first
    steps; where its neighbours sit spike-min-ratio above the rolling median (a level the
    median lags), that level and the spike's multiple of it, which the median alone
    overstates; "" otherwise."""
    i, value, med = spike
    if i < t.spike_min_history:
        return " (the steps before it: the first steps)"
    reach = 2 * RECOVERY_STEPS
    near = [r.grad_norm for r in steps[max(0, i - reach) : i + 1 + reach] if r is not steps[i]]
    level = statistics.median(near) if len(near) >= reach else 0.0
    if med <= 0 or level < t.spike_min_ratio * med:
        return ""
    return (
        f" (the {len(near)} steps around it sit at {num(level)}, a level the rolling median "
        f"lags: it is {value / level:.1f}× that level)"
    )
