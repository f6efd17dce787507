"""GS404 told as information where the gradient norm's rise is the objective sharpening as
it is minimised, not steps too large: over the same window the loss kept falling, steadily,
and the optimizer's steps did not grow with the gradient (Adam's are bounded by its lr
whatever the gradient's size), and the run's fall slowed as a descent toward a minimum
does (one that does not is GS423's unbounded fall, whose growth is the bug). A Gaussian
likelihood whose learned noise or scale shrinks (a GP's or deep kernel's marginal
likelihood, a heteroscedastic regression) has a gradient that grows as 1/σ² while it
descends; a step too large makes the loss stall or rise, and under SGD the steps grow with
the gradient. No torch."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.fmt import num
from gradscope.rules.step_common import Series, loss_steps, middle_median, window
from gradscope.steps.records import StepRecord

STEADY = 0.8
"""The rank correlation of the loss with the step at or below -STEADY: it fell steadily."""
STEPS_GREW = 2.0
"""The sampled update norm's last over its first, at or above which the steps grew."""

ADVICE = (
    "nothing to change while the loss also falls on held-out data; if a learned noise "
    "variance or scale is heading to 0 (the model fitting the noise), give it a floor or a "
    "prior"
)


def slowing(run_losses: Sequence[float]) -> bool:
    """The run's loss fell by less in its second half than in its first: a descent that
    nears its minimum (one that falls as fast or faster has none: GS423's unbounded fall)."""
    w = window(len(run_losses))
    if len(run_losses) < 3 * w:
        return False
    first, last = statistics.median(run_losses[:w]), statistics.median(run_losses[-w:])
    middle = middle_median(run_losses, w)
    return first > middle > last and middle - last < first - middle


def steady_descent(
    s: Series, tail: Sequence[StepRecord], q: int, rank: Callable[[list[float], list[float]], float]
) -> str | None:
    """Evidence that the window's loss fell steadily, the run's fall slowing, while its steps
    did not grow; None where it did not fall or fell without slowing, or the steps grew, or
    fewer than two updates were measured."""
    losses = [(r.step, r.loss) for r in tail if r.loss is not None and math.isfinite(r.loss)]
    updates = [r.update_norm for r in tail if r.update_norm is not None and r.update_norm > 0]
    if len(losses) < len(tail) or len(updates) < 2 or not slowing(loss_steps(s)[1]):
        return None
    rho = rank([float(s) for s, _ in losses], [v for _, v in losses])
    early = statistics.median(v for _, v in losses[:q])
    late = statistics.median(v for _, v in losses[-q:])
    if rho > -STEADY or late >= early or updates[-1] >= STEPS_GREW * updates[0]:
        return None
    return (
        f"the loss fell steadily over the same steps ({num(early)} → {num(late)}, rank "
        f"correlation with the step {rho:.2f}) and the optimizer's steps did not grow (update "
        f"norm {num(updates[0])} → {num(updates[-1])})"
    )


def as_information(finding: Finding, evidence: str) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{finding.message}, while {evidence}: the objective sharpens "
            "as it is minimised (a likelihood whose learned noise shrinks has a gradient "
            "growing as 1/σ²), not a step too large"
        ),
        advice=ADVICE,
        evidence=(*finding.evidence, evidence),
    )
