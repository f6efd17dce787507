"""Weights that scipy.optimize.minimize moves (botorch's `fit_gpytorch_mll`: L-BFGS-B
calls the objective, which writes the weights from scipy's vector and runs backward) are
updates by hand whose every step is one evaluation of a fixed objective, the line search's
trial points included. A trial point that overshoots (the loss 1000× higher, the gradient
with it) and the gradient that falls to scipy's tolerance at convergence (one fit's kept
while the next model is fitted, as botorch fits a ModelListGP) are the method, not a bad
batch (GS402, GS403, GS450) nor dying units (GS405). A NaN the objective
reaches is still an error, and the same weights stepped by hand on mini-batches still
spike at their corrupted batch. A model built after the first fit (botorch's loop refits
a new GP each iteration) is watched as the first was."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

pytest.importorskip("scipy.optimize")


@pytest.mark.parametrize("method", ["lbfgsb", "bfgs", "two-fits"])
def test_a_scipy_minimisers_evaluations_are_no_spikes(method):
    report = domain_watched("scipy_minimize.py", method)
    assert not report.faults, report.internal_error()
    assert report.run.optimizers == ("manual update",)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], loud
    assert report.run.settings_of(0).evaluations


def test_a_nan_the_minimiser_reaches_is_still_an_error():
    report = domain_watched("scipy_minimize.py", "nan")
    assert "GS401" in {f.rule for f in report.findings if f.severity >= Severity.ERROR}


def test_a_model_built_after_the_first_fit_is_watched_too():
    """botorch's optimisation loop refits a new GP at each iteration: the second fit's steps
    are recorded, and a NaN only its data holds is found (the watch saw the first alone)."""
    first = domain_watched("scipy_minimize.py", "lbfgsb")
    both = domain_watched("scipy_minimize.py", "two-fits")
    assert len(both.run.steps) > len(first.run.steps) + 20
    assert len(both.run.params) == 2 * len(first.run.params)
    report = domain_watched("scipy_minimize.py", "refit-nan")
    assert "GS401" in {f.rule for f in report.findings if f.severity >= Severity.ERROR}


def test_the_same_weights_stepped_by_hand_still_spike():
    report = domain_watched("scipy_minimize.py", "by-hand")
    assert report.run.settings_of(0) is None
    spikes = {f.rule for f in report.findings if f.severity >= Severity.WARNING}
    assert {"GS402", "GS403"} <= spikes, report.findings
