"""Gradients that died: a parameter whose gradient norm fell a thousandfold below what it
had and stayed there (saturated tanh units, dead ReLUs after steps too large).

Its update ratio from then on is ~0 because nothing reaches it, not because its learning
rate is small: GS419 judges the ratios from before, GS410 leaves such a parameter alone.
No torch."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gradscope.steps.records import StepRecord

DEAD_FALL = 1e-3
"""A gradient norm below this fraction of the largest it had before is dead."""

DEAD_MIN_STEPS = 3
"""Steps a gradient must stay dead (to the end of the steps looked at) to count."""


def _norm(r: StepRecord, i: int) -> float | None:
    if not r.detail or i >= len(r.param_norms):
        return None
    return r.param_norms[i]


def dead_from(steps: Sequence[StepRecord], i: int) -> int | None:
    """The first of `steps` at which parameter i's gradient norm fell below DEAD_FALL of the
    largest it had before, and where the median of its norms from there to the last of them
    (DEAD_MIN_STEPS at least) stays below that too; None: it never died there (or nothing
    was recorded)."""
    norms = [(r.step, n) for r in steps if (n := _norm(r, i)) is not None]
    peak = 0.0
    for k, (step, n) in enumerate(norms):
        floor = DEAD_FALL * peak
        rest = [v for _, v in norms[k:]]
        if n < floor and len(rest) >= DEAD_MIN_STEPS and statistics.median(rest) < floor:
            return step
        peak = max(peak, n)
    return None


def before_death(steps: Sequence[StepRecord], i: int) -> list[StepRecord]:
    """The steps before parameter i's gradients died (all of them if they never did)."""
    dead = dead_from(steps, i)
    return [r for r in steps if dead is None or r.step < dead]
