"""GS423: a loss that falls without bound. A descent toward a minimum slows as it nears it
and its gradient shrinks there; a loss that falls at least as fast in the second half of the
run as in the first while its gradient grows tenfold has no minimum it is approaching: a term
of the objective falls without bound (a KL, an entropy or a log-determinant subtracted where
a negative ELBO or an NLL adds it). A density's NLL below 0 is no sign of it: it settles.
No torch."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import (
    Series,
    about,
    by_optimizer,
    finite,
    loss_steps,
    middle_median,
    several,
    window,
)
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.records import StepRecord, WatchRun

ORDER = 10.0
"""An order of magnitude: the gradient's growth that no settling descent shows."""


@rule(
    "GS423",
    "loss-unbounded",
    Severity.ERROR,
    "unbounded",
    Stage.WATCH,
    "watch: the loss falls at least as fast in the second half of the run as in the first, "
    "while the gradient norm grows tenfold: the objective has no minimum the run nears",
    example="a VAE whose loss is `rec - kl` (the KL subtracted): the loss goes 7.2 → -372 and "
    "the gradient norm 3.9 → 156, with no other finding",
    fix="check the sign of each term: a negative ELBO adds the KL to the reconstruction, an NLL "
    "is -log p minimised; a term meant to grow without bound needs a bound of its own",
    supersedes=("GS419",),  # the steps are large by what the objective asks, not by the lr
    objectives=(
        "a single optimizer's loss of any kind but one whose graph shows every term bounded "
        "below (cross-entropy, MSE, ...: it cannot fall without bound, and GS418 names a "
        "negated one): an ELBO, an NLL, a custom objective; a GAN's or an actor-critic's "
        "several optimizers are not judged (a generator's loss drifts by design)"
    ),
    explains=DIVERGENCE,
)
def loss_unbounded(run: WatchRun, t: Thresholds) -> list[Finding]:
    """The loss's medians over the first, middle and last windows fall, the second half's fall
    at least the first's (linear or faster: a descent toward a minimum slows), and the gradient
    norm's median over the last window is ORDER× the first's or more and still its highest: the
    slope steepens as the loss falls. A density's NLL below 0 settles, its fall slows; a loss
    bounded below by its graph (lower_bound) cannot do this."""
    if several(run):
        return []
    out = []
    for s in by_optimizer(run):
        kind = run.loss_kind(s.index)
        if kind is not None and (kind.lower_bound() is not None or kind.negated_terms()):
            continue
        found = _unbounded(s)
        if found is not None:
            out.append(found)
    return out


def _unbounded(s: Series) -> Finding | None:
    steps, losses = loss_steps(s)
    norms = [r.grad_norm for r in steps]
    w = window(len(losses))
    if len(losses) < 3 * w or not all(finite(v) and v > 0 for v in norms):
        return None
    first, middle, last = (
        statistics.median(losses[:w]),
        middle_median(losses, w),
        statistics.median(losses[-w:]),
    )
    g_first, g_middle, g_last = (
        statistics.median(norms[:w]),
        middle_median(norms, w),
        statistics.median(norms[-w:]),
    )
    if not first > middle > last or middle - last < first - middle:
        return None  # not falling, or slowing: a descent that nears its minimum
    if g_last < ORDER * g_first or g_last < g_middle:
        return None
    at = _steepened(steps, norms, ORDER * g_first)
    return about(_finding(s, steps, (first, middle, last), (g_first, g_last), w, at), [at])


def _steepened(steps: Sequence[StepRecord], norms: Sequence[float], line: float) -> int:
    """The first step from which the gradient norm stayed above the line at most of the
    steps after it: where the fall's slope became ORDER× its start."""
    for i, v in enumerate(norms):
        rest = norms[i:]
        if v >= line and sum(x >= line for x in rest) * 2 >= len(rest):
            return steps[i].step
    return steps[-1].step


def _finding(
    s: Series,
    steps: Sequence[StepRecord],
    losses: tuple[float, float, float],
    norms: tuple[float, float],
    w: int,
    at: int,
) -> Finding:
    first, middle, last = losses
    g_first, g_last = norms
    return RULES["GS423"].finding(
        s.subject("loss"),
        s.say(
            f"the loss falls without bound: {num(s.user(steps[0].loss or 0))} at step "
            f"{steps[0].step} to {num(s.user(steps[-1].loss or 0))} at step {steps[-1].step}, "
            f"no slower in the second half ({num(middle - last)}) than in the first "
            f"({num(first - middle)}), while the gradient norm grew {num(g_last / g_first)}× "
            f"(10× its start from step {at} on); a descent toward a minimum slows and its "
            "gradient shrinks: this objective has a term that falls without bound, most "
            "often one with its sign flipped (a KL, an entropy or a log-determinant "
            "subtracted where a negative ELBO or an NLL adds it)"
        ),
        "check the sign of each term of the loss: a negative ELBO is the reconstruction "
        "plus the KL, an NLL is -log p minimised; a term meant to grow needs a bound of its "
        "own (a clamp, a penalty); the lr is not the cause",
        value=s.user(last),
        threshold=ORDER,
        evidence=(
            f"median loss {num(s.user(first))} over the first {w} steps, "
            f"{num(s.user(middle))} at the middle, {num(s.user(last))} over the last",
            f"median gradient norm {num(g_first)} over the first {w} steps, "
            f"{num(g_last)} over the last",
        ),
    )
