"""GS450 names one layer's own jump, not a batch that scales the whole gradient: a Poisson
regression's heavy-tailed counts move every layer 60-75× at one step (within the total
norm's own history, so no GS403 either), and the layer the total hides is still named
where the rest of the gradient held (the corpus's column and penalty runs:
tests/watcher/precursor/test_layer_spike_runs.py)."""

from __future__ import annotations

import pytest

from gradscope.rules.step_layers import rest_moved
from gradscope.steps.layer_spikes import LayerSpike
from tests.watcher.watch_scripts import watched


def _spike(value, median, total, total_median):
    return LayerSpike(value / median, 150, 0, value, median, 9.0, 10.0, total, total_median)


def test_the_rest_of_the_gradient_is_the_total_without_the_layer():
    assert rest_moved(_spike(60.0, 1.0, 61.0, 2.0)) == pytest.approx(11.0 / 3**0.5)
    assert rest_moved(_spike(300.0, 4.7, 622.0, 8.6)) > 70  # every layer scaled
    assert rest_moved(_spike(5.0, 1.0, 5.0, 1.0)) == float("inf")  # the layer is the total


@pytest.mark.slow
def test_a_batch_that_scales_every_layer_is_no_layer_spike():
    report = watched("poisson_counts.py")
    assert not {f.rule for f in report.findings} & {"GS450", "GS403"}, report.findings
