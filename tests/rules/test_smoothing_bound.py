"""A label-smoothed cross-entropy's smoothing term, -Σ_c log q_c over C classes, is never
below C ln C (q uniform), so its loss's lower bound counts it: a softmax fed to
cross_entropy(label_smoothing=0.1) over 10 classes is never below 0.9·1.46 + 0.1·ln 10 =
1.545 (the bound said 1.32, as if the smoothing term could reach 0). No torch."""

from __future__ import annotations

import math

import pytest

from gradscope.steps.meaning import LossKind, LossTerm

C, EPS = 10, 0.1
DOUBLE = math.log(1 + (C - 1) / math.e)


def test_a_double_softmax_under_label_smoothing_is_bounded_by_both_terms():
    kind = LossKind(
        (
            LossTerm("cross_entropy", "mean", 1 - EPS, classes=C, misfed="softmax", floor=DOUBLE),
            LossTerm("label_smoothing", "mean", EPS / C, classes=C),
        )
    )
    assert kind.lower_bound() == pytest.approx((1 - EPS) * DOUBLE + EPS * math.log(C))
    assert kind.lower_bound() == pytest.approx(1.545, abs=1e-3)


def test_the_bound_of_a_smoothed_cross_entropy_stays_below_a_uniform_guess():
    kind = LossKind(
        (
            LossTerm("cross_entropy", "mean", 1 - EPS, classes=C),
            LossTerm("label_smoothing", "mean", EPS / C, classes=C),
        )
    )
    assert kind.lower_bound() == pytest.approx(EPS * math.log(C))  # each term at its own least
    assert kind.lower_bound() < kind.uniform() == pytest.approx(math.log(C))
