"""GS415's advice for a loss that fell a little and then flattened (information). A lower
learning rate helps where the step was too large: the clip bound at most steps, or the run
says the model did not learn. A model that learned and flattened early is more often a
task near its floor: a click or rating model's log loss on noisy labels ends near the
labels' own entropy, a few percent below where it started, and a lower learning rate only
slows it."""

from __future__ import annotations

from collections.abc import Sequence

from gradscope.steps.records import StepRecord

TOO_LARGE = (
    "if this is a fresh model, it stalled near where it started: try a lower learning rate or "
    "a longer warm-up; fine if it is a fine-tuning run that starts near its best"
)

NEAR_FLOOR = (
    "not judged: nothing else in the run says it did not learn (update/weight ratios and "
    "gradients look like learning), and a loss on noisy targets flattens near their own "
    "entropy (a click-through model's log loss falls a few percent); judge it by a held-out "
    "metric (AUC, NDCG, accuracy) before changing the learning rate"
)


def advice(steps: Sequence[StepRecord], did_not_learn: bool) -> str:
    """The learning rate's advice where the clip bound at most steps or the run did not
    learn; else the floor's."""
    binds = sum(r.clipped for r in steps) * 2 > len(steps)
    return TOO_LARGE if binds or did_not_learn else NEAR_FLOOR
