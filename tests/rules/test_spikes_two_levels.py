"""A signed loss that takes two levels in turn (PPO's two epochs over each rollout: the
clipped surrogate is -mean(advantage), float noise around 0, at ratio 1, then a few
thousandths below): the deviations from its window's median see only the level that holds
the median, so a value of 2e-5 read as a spike; the steps' own differences give its noise.
A real jump on the same series still is one."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.rules.step_common import spikes

ACTOR = [  # an actor's losses as a watch read them: separate actor and critic optimizers
    -7.45e-09, -0.00578, -2.61e-08, -0.0112, -2.42e-08, -0.000889, -2.98e-08, -0.00286,
    -1.86e-09, -0.00293, 1.49e-08, -0.0039, 3.73e-09, -0.00317, -1.49e-08, -0.00294,
    -2.05e-08, -0.00486, 9.31e-09, -0.00469, -9.31e-09, -0.00328, -2.05e-08, -0.00783,
    3.35e-08, -0.0036, -1.07e-08, 2.19e-05, -7.45e-09, -0.00133,
]  # fmt: skip


def test_a_value_between_two_levels_is_no_spike():
    assert spikes(ACTOR, Thresholds()) == []


def test_a_jump_above_both_levels_is_still_a_spike():
    values = list(ACTOR)
    values[27] = 0.5  # a corrupted batch
    assert [i for i, _, _ in spikes(values, Thresholds())] == [27]
