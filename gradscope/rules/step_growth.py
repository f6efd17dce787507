"""A sampled series that grows steadily for hundreds of steps: the trend tests both logit
precursors (GS453, GS454) share. No torch."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Sequence

SPAN = 256
"""Steps a trend is judged over by default: it rose over at least this many steps, not in
one jump."""
RISING = 0.6
"""Share of the consecutive samples in that span that rose: a trend, not one spike."""
CLIMB = 3
"""Or, for a quantity that grows by orders of magnitude (steady_rise), this many samples in
a row each above the one before: a climb, not one spike, even where an early bump and dip
(a warm-up's) keep the share of rises over the span below RISING."""
EARLY_BACK = 32
"""Before a span of history, the climb is judged against the value this many steps before
(two samples at one in 16)."""
EARLY_SAMPLES = 5
"""Samples at least, up to the one judged before a span of history: a trend, not a jump."""


def first_trend(
    steps: Sequence[int],
    values: Sequence[float],
    grown: Callable[[int, int], bool],
    span: int = SPAN,
    climb: int = 0,
) -> int | None:
    """The first sample i with `span` steps of samples before it, at which `grown(back, i)`
    holds (back: the last sample at least `span` steps before) and the series rose at
    RISING of the samples from back to i, or (climb > 0) at each of the last `climb`
    samples up to i; None if never."""
    back = 0
    for i, step in enumerate(steps):
        while back < i and steps[back + 1] <= step - span:
            back += 1
        if step - steps[back] < span or not grown(back, i):
            continue
        between = values[back : i + 1]
        rises = [b > a for a, b in itertools.pairwise(between)]
        if sum(rises) >= RISING * len(rises) or (0 < climb <= len(rises) and all(rises[-climb:])):
            return i
    return None


def steady_rise(
    steps: Sequence[int],
    values: Sequence[float],
    level: float,
    growth: float,
    doubling: float,
    span: int = SPAN,
) -> int | None:
    """The first sample at which the series is at least `level`, `growth`× its early level
    (the median of its first three samples) and `doubling`× its value `span` steps
    before, on a steady trend or a climb of CLIMB samples (first_trend); None if never."""
    if len(values) < 6:
        return None
    climbed = early_climb(steps, values, level, growth, doubling, span)
    if climbed is not None:
        return climbed
    early = statistics.median(values[:3])

    def grown(back: int, i: int) -> bool:
        v = values[i]
        return v >= level and v >= growth * early and v >= doubling * values[back]

    return first_trend(steps, values, grown, span, CLIMB)


def early_climb(
    steps: Sequence[int],
    values: Sequence[float],
    level: float,
    growth: float,
    doubling: float,
    span: int,
) -> int | None:
    """The first sample i less than `span` steps after the first, with EARLY_SAMPLES
    samples up to it, at which the series is at least `level`, `growth`× its first sample,
    `doubling`× its value EARLY_BACK steps before, and rose at RISING of the samples since
    the first or at each of the last CLIMB: the same trend as steady_rise's, judged from
    the start, where a climb that a warm-up's end turns into a blow-up leaves no span of
    history before it; None if never."""
    for i in range(EARLY_SAMPLES - 1, len(steps)):
        if steps[i] - steps[0] >= span:
            return None
        v = values[i]
        back = max(j for j in range(i) if steps[j] <= steps[i] - EARLY_BACK or j == 0)
        if v < level or v < growth * values[0] or v < doubling * values[back]:
            continue
        rises = [b > a for a, b in itertools.pairwise(values[: i + 1])]
        if sum(rises) >= RISING * len(rises) or all(rises[-CLIMB:]):
            return i
    return None
