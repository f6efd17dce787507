"""Spikes of a loss that sums several terms and sits near 0 with both signs (GS402): a
policy-gradient term, a value error and an entropy bonus (PPO, A2C, recurrent PPO). Its
rolling median is a difference of terms, near 0, so a multiple of it says nothing, and each
rollout brings the value term new returns and the policy term new advantages: the level
moves with the data the model gathered. Such spikes are information unless one stands far
above the others, the gradient norm spiked with one, or a loss went non-finite. No torch."""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.rules.spikes_by_design import RECURRING, Spike, outlier
from gradscope.rules.step_common import Series
from gradscope.steps.records import StepRecord, WatchRun


def signed_sum_spikes(
    run: WatchRun,
    s: Series,
    steps: list[StepRecord],
    found: list[Spike],
    norm_spikes: set[int],
    t: Thresholds,
) -> str:
    """The facts when the spikes are those of a signed sum of terms: the loss has two terms
    or more (known or not), its finite values take both signs, RECURRING spikes or more,
    none far above the others (outlier), none at a step whose gradient norm spiked, and no
    loss of the series non-finite; "" if not."""
    kind = run.loss_kind(s.index)
    if kind is None or len(kind.terms) + kind.unknown_terms < 2 or len(found) < RECURRING:
        return ""
    losses = [r.loss for r in s.live() if r.loss is not None]
    if any(not math.isfinite(x) for x in losses) or not (min(losses) < 0 < max(losses)):
        return ""
    if outlier(_signed(found), t) or any(steps[i].step in norm_spikes for i, _, _ in found):
        return ""
    return (
        f"the loss ({kind.describe()}) sums several terms and takes both signs: its rolling "
        "median is a difference near 0, and each new batch of the data the model gathered "
        "(a rollout's returns and advantages) moves its level; none of the "
        f"{len(found)} spikes stands far above the others, none came with a gradient-norm "
        "spike, none was followed by a non-finite loss"
    )


def _signed(found: list[Spike]) -> list[Spike]:
    """The spikes as jumps over the loss's spread: outlier() reads v / m on a log scale,
    meaningless for a median near 0 or below; the jump v - m over the least jump is not."""
    jumps = [v - m for _, v, m in found]
    least = min(j for j in jumps if j > 0) if any(j > 0 for j in jumps) else 1.0
    return [(i, 1.0 + (v - m) / least, 1.0) for i, v, m in found]
