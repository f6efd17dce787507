"""A loss that came to rest with its gradient (GS405's excuse): a deterministic objective
whose level says nothing of convergence (a negative log joint, a MAP fit by an enumerated
ELBO under a point-mass guide: its floor is not 0), where the optimizer hovers at the
minimum. Pure functions of step records, no torch."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

from gradscope.steps.records import StepRecord


def came_to_rest(steps: Sequence[StepRecord], k: int, q: int, factor: float) -> bool:
    """The loss fell from its first k steps to its last q, and its step-to-step movement
    over the last q is at most `factor` (the fall GS405 asks of the gradient) times its
    movement over the first k: nothing moves the loss but the steps, and they move it by
    less and less as the gradient shrinks toward a minimum (Adam hovering there moves it in
    its sixth digit). A batch of data, or a Monte Carlo ELBO's sample, moves a loss by its own
    noise however dead the network is: its movement does not fall with the gradient."""
    early, late = _losses(steps[:k]), _losses(steps[-q:])
    if len(early) < 2 or len(late) < 2 or statistics.median(late) >= statistics.median(early):
        return False
    before, after = _movement(early), _movement(late)
    return before > 0 and after <= factor * before


def still_descending(steps: Sequence[StepRecord], q: int) -> bool:
    """Every one of the last q steps lowered the loss (equal counts as no rise) and they
    lowered it overall: a deterministic objective a term still descends, whatever one
    group's gradient does (a MAP fit's locations at their conditional optimum while its
    mixture weights keep falling toward a boundary). A batch of data, or a Monte Carlo
    ELBO's sample, never lowers a loss at each of 5 or more steps in a row by chance."""
    window = steps[-q:]
    late = _losses(window)
    if len(late) < 5 or len(late) < len(window):
        return False
    return all(b <= a for a, b in itertools.pairwise(late)) and late[-1] < late[0]


def _losses(steps: Sequence[StepRecord]) -> list[float]:
    return [r.loss for r in steps if r.loss is not None and math.isfinite(r.loss)]


def _movement(losses: list[float]) -> float:
    """The median change of the loss from one step to the next."""
    return statistics.median(abs(b - a) for a, b in itertools.pairwise(losses))
