"""A series at exactly 0 (a met margin's loss, its zero gradients) has no scale to spike
against, and a loss at exactly 0 has not stalled."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.rules.step_common import spikes, stalled


def test_a_value_after_a_window_of_zeros_is_no_spike():
    values = [0.3, 0.2, 0.1] + [0.0] * 40 + [0.02] + [0.0] * 10 + [0.5] + [0.0] * 5
    assert spikes(values, Thresholds()) == []


def test_a_signed_series_still_spikes_over_a_nonzero_median():
    values = [(-1) ** i * 0.01 + 0.5 for i in range(60)] + [5.0] + [0.5] * 5
    assert [i for i, _, _ in spikes(values, Thresholds())] == [60]
    with_zero = [0.0, 0.1] * 30 + [5.0] + [0.1] * 5  # a median of 0.05: a scale
    assert [i for i, _, _ in spikes(with_zero, Thresholds())] == [60]


def test_a_loss_at_exactly_zero_has_not_stalled():
    assert not stalled([0.5, 0.4, 0.3, 0.1] + [0.0] * 60, Thresholds())
    assert stalled([0.5] * 64, Thresholds())
