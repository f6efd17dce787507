"""A score-function loss, -(r - b)·log π(a) with an entropy bonus and a running baseline b
(REINFORCE on a contextual bandit, NVIL, a discrete latent's policy term), starts near 0 while
b catches up with the rewards, then sits below 0 and swings as far on its own. Judged against
its first three steps, whose spread is no spread, a value of its ordinary swing read as a
spike. In its first steps a series that is not all positive is judged on the spread it shows
once it has a full baseline too; a jump far past that spread, early or late, is still a spike,
and so is an early jump of a loss far from 0 (a Gaussian NLL below 0) that later sits still."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.rules.step_common import spikes

# the first 72 steps of a bandit's REINFORCE loss (RMSprop, baseline updated at 0.1 a step)
BANDIT = [
    -0.11, -0.01, -0.05, 0.57, 0.06, 0.14, -0.39, -0.25, -0.65, -0.37, 0.52, 0.23, -0.51, -0.17,
    -0.21, -0.02, -0.01, -0.57, -0.4, 0.04, -0.61, -1.44, -1.35, -1.21, -0.9, -0.43, -0.44,
    -0.47, -0.78, -0.71, -0.43, -1.1, -0.72, -1.34, -1.2, -0.94, -1.7, -0.82, -0.98, -0.93,
    -0.99, -0.48, -1.25, -0.99, -1.08, -1.08, -1.38, -1.32, -1.36, -1.03, -2.03, -1.12, -0.67,
    -0.57, -0.88, -1.06, -1.3, -0.8, -1.34, -0.81, -0.58, -1.1, -1.58, -0.75, -1.29, -0.91,
    -0.7, -0.99, -1.12, -0.91, -0.74, -1.0,
]  # fmt: skip


def test_a_score_function_loss_finding_its_level_has_no_spike():
    assert spikes(BANDIT, Thresholds()) == []


def test_a_corrupted_batch_among_its_first_steps_is_still_a_spike():
    early = [*BANDIT[:5], 6.0, *BANDIT[6:]]
    assert [i for i, _, _ in spikes(early, Thresholds())] == [5]
    late = [*BANDIT[:60], 6.0, *BANDIT[61:]]
    assert [i for i, _, _ in spikes(late, Thresholds())] == [60]


def test_an_early_jump_of_a_loss_that_later_sits_still_is_still_a_spike():
    nll = [-3.0, -3.1, -2.9, -3.0, 15.0, *(-3.0 - 0.01 * (i % 3) for i in range(70))]
    assert [i for i, _, _ in spikes(nll, Thresholds())] == [4]
