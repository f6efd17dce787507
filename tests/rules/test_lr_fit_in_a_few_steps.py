"""GS419 reads the update ratios from before a matrix's gradients died, as a ratio of 0
with no gradient says nothing of the lr. A model that fits its data in a few steps (an
ArcFace head at scale 30 starts near a loss of 30 and is at 0.1 by step 10, SGD at the
insightface lr 0.1) has gradients a thousandfold below their first ones too: they fell
with the loss, not because units died, so its large first steps alone are not its ratio.
The same first steps with a loss that never fell (gradients that died), or that rose and
came part of the way back, still warn."""

from __future__ import annotations

import math

from gradscope.findings import Severity
from gradscope.steps.meaning import GroupSettings, LossKind, LossTerm, OptimizerSettings
from gradscope.steps.records import ParamInfo
from tests.rules.test_rules_objectives import found, rec, run_of

SGD = OptimizerSettings("SGD", 1, (GroupSettings(0.1, momentum=0.9),), "torch")
FOUR_CLASSES = LossKind((LossTerm("cross_entropy", "mean", 1.0, classes=4),))
MATRICES = tuple(ParamInfo(f"net.{k}.weight", (16, 16), True, True, 0.1, 0, 4.0) for k in range(3))


def _run(losses: list[float], grads: list[float]):
    """Update ratios of 0.9/t over the first ten steps (each sampled), then 1e-3 every 8th."""
    recs = []
    for s, (loss, g) in enumerate(zip(losses, grads, strict=True), 1):
        ratio = 0.9 / s if s <= 10 else 1e-3 if s % 8 == 0 else None
        recs.append(
            rec(
                s,
                loss,
                norm=g,
                lrs=(0.1,),
                param_norms=(g, g, g),
                update_ratios=None if ratio is None else (ratio, ratio, ratio),
            )
        )
    return run_of(recs, FOUR_CLASSES, params=MATRICES, members=((0, 1, 2),), settings=((SGD,),))


def test_gradients_that_fell_with_the_loss_leave_the_lr_alone():
    n = 120
    losses = [max(0.08 + 0.7 * math.exp(-s / 40), 31.0 * 0.45 ** (s - 1)) for s in range(1, n + 1)]
    grads = [300.0 * (loss / 31.0) ** 2 for loss in losses]
    assert "GS419" not in found(_run(losses, grads))


def test_gradients_that_died_while_the_loss_stayed_still_warn():
    n = 120
    losses = [1.39 + 0.01 * (s % 3) for s in range(1, n + 1)]
    grads = [300.0 if s <= 5 else 1e-4 for s in range(1, n + 1)]
    (f,) = found(_run(losses, grads))["GS419"]
    assert f.severity == Severity.WARNING and "rewrites" in f.message


def test_a_loss_that_rose_and_came_part_way_back_is_no_fit():
    """A 2-D ArcFace at scale 64 that never learns: 74 at the start, 100 by step 20, 84 at
    the end (its medians fall by more than a few percent; it fit nothing)."""
    n = 120
    losses = [74.0 + 26.0 * min(s, 20) / 20 - 16.0 * max(0, s - 20) / 100 for s in range(1, n + 1)]
    grads = [300.0 if s <= 5 else 1e-4 for s in range(1, n + 1)]
    assert "GS419" in found(_run(losses, grads))
