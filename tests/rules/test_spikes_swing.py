"""A signed loss that swings both ways around 0 (trl's GRPOTrainer, trl/trainer/grpo_trainer.py:
on-policy the importance ratio is 1, so the loss is minus the token-weighted mean of advantages
normalised within each prompt's group, near 0 and of either sign) is, in its first steps, no
spike where it reaches no more than the early ratio times the magnitude those steps already
swung to. A jump far past that swing (a corrupted batch), early or late, still is."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.rules.step_common import spikes

GRPO_LOSSES = [0.0, 0.0, -0.0228, -0.1632, 0.1631, 0.0, -1e-7, 0.1631, 0.0307, 0.0]


def _swinging(n: int) -> list[float]:
    return [0.16 * ((i * 7) % 5 - 2) / 2 + 0.01 for i in range(n)]


def test_a_group_normalised_surrogate_swinging_both_ways_has_no_spike():
    assert spikes(GRPO_LOSSES, Thresholds()) == []
    assert spikes(_swinging(80), Thresholds()) == []


def test_a_jump_far_past_the_swing_is_still_a_spike():
    early = [*GRPO_LOSSES[:4], 1.5, *GRPO_LOSSES[5:]]
    assert [i for i, _, _ in spikes(early, Thresholds())] == [4]
    late = [*_swinging(60), 5.0, *_swinging(5)]
    assert [i for i, _, _ in spikes(late, Thresholds())] == [60]
