"""An external minimiser that converged (scipy's L-BFGS-B under botorch's
`fit_gpytorch_mll`): it stops where the gradient falls below its tolerance, so a gradient
norm that fell by orders of magnitude there is its stopping criterion met, not units that
died. No torch."""

from __future__ import annotations

import math

from gradscope.rules.step_common import Series
from gradscope.steps.records import StepRecord


def minimised(s: Series, steps: list[StepRecord], q: int) -> bool:
    """The series is an external minimiser's evaluations and the lowest loss of all of them
    came in the last q, below the first: it ended at its best point. A network whose units a
    step saturated sits above a loss it reached before (or never fell); an objective of any
    sign (a likelihood's negative log) is compared by order, not by ratio."""
    if not s.evaluations:
        return False
    losses = [r.loss for r in steps if r.loss is not None and math.isfinite(r.loss)]
    late = [r.loss for r in steps[-q:] if r.loss is not None and math.isfinite(r.loss)]
    return bool(late) and min(late) <= min(losses) and min(late) < losses[0]
