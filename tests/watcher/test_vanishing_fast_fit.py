"""A run that fits its data within its first steps (randomized-smoothing training of a small
CNN: Gaussian noise augmentation, SGD at lr 0.1 with momentum, 512 samples): its loss fell
from 1.7 to 1e-4 in 15 steps, its head's gradient norm with it, then a hard noisy batch now and
then. GS405 compared the first quarter's median loss (already fitted) with the last
quarter's and called the norm's fall vanishing gradients; the norms are read from the first
steps, and so is now the loss they are judged against. The same norms under a loss that
never fell are still dead units. No torch."""

from __future__ import annotations

from tests.watcher.test_watch_rules_series import found, rec, run_of

LOSS = [1.715, 1.4062, 0.9042, 0.4491, 0.1797, 0.0672, 0.0247, 0.0095, 0.2209, 0.0019]
LOSS += [0.0009, 0.0005, 0.0003, 0.0002, 0.0001, 0.0001] + [0.0] * 5 + [0.1843, 0.2097, 0.0]
LOSS += [0.1961, 0.0, 0.0, 0.173] + [0.0] * 5 + [0.1706, 0.0, 0.1795] + [0.0] * 10
LOSS += [0.3193, 0.0, 0.0, 0.0, 0.1572, 0.0, 0.0, 0.1063, 0.0001, 0.0003, 0.0001, 0.0002]
LOSS += [0.0001, 0.0769, 0.0004, 0.0005, 0.0004, 0.0779, 0.0005, 0.0004, 0.0007, 0.0863]
LOSS += [0.0963, 0.0008, 0.0005, 0.0006, 0.064, 0.0009, 0.0009, 0.0007, 0.0016, 0.1126]
LOSS += [0.0021, 0.0004]
HEAD_NORM = [max(loss, 1e-5) for loss in LOSS]
"""The head's gradient norm, which falls with its cross-entropy: a fitted sample gives none."""


def test_a_run_that_fits_its_data_in_its_first_steps_is_no_vanishing():
    recs = [rec(s, loss, HEAD_NORM[s - 1]) for s, loss in enumerate(LOSS, start=1)]
    assert "GS405" not in found(run_of(recs))


def test_the_same_fall_under_a_loss_that_stayed_is_still_vanishing():
    stayed = [1.7 * (1 + 0.05 * ((s * 7) % 5 - 2)) for s in range(len(LOSS))]
    recs = [rec(s, loss, HEAD_NORM[s - 1]) for s, loss in enumerate(stayed, start=1)]
    assert "GS405" in found(run_of(recs))
