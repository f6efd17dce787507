"""LBFGS sizes its own step (up to max_iter iterations along a curvature-scaled direction,
their length set by a line search or lr times that estimate): a step that moves the weights
by a third of their norm while the loss falls a thousandfold is its design, not a learning
rate too high (GS419 said "lower it 300×"). The overshoot of an lr too high for it still is
named, by the NaN it writes."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["wolfe", "plain"])
def test_lbfgs_large_steps_on_a_falling_loss_are_silent(mode):
    report = domain_watched("lbfgs_fit.py", mode)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    assert report.to_dict()["summary"]["per_optimizer"][0]["steps"] == 12


def test_lbfgs_overshooting_to_nan_is_named():
    report = domain_watched("lbfgs_fit.py", "high")
    errors = {f.rule for f in report.findings if f.severity >= Severity.ERROR}
    assert errors & {"GS439", "GS401"}, report.findings


@pytest.mark.parametrize("mode", ["logistic", "softmax", "wolfe"])
def test_lbfgs_converged_on_a_classifiers_noise_floor_is_silent(mode):
    """The loss falls within LBFGS's first step to the floor its noisy labels set (0.15-
    0.17, not near 0) and the gradients vanish there: convergence, not large steps that
    killed units (GS419 said "lower the learning rate 1000×"); and the whole dataset every
    step is LBFGS's method, not a loader stuck on one batch (GS443)."""
    report = domain_watched("lbfgs_classify.py", mode)
    assert [f for f in report.findings if f.rule in ("GS419", "GS443")] == [], report.findings
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings


def test_lbfgs_that_overshoots_and_kills_its_units_is_named_with_a_line_search():
    report = domain_watched("lbfgs_classify.py", "dead")
    (lr,) = [f for f in report.findings if f.rule == "GS419"]
    assert "gradients of 2 weight matrices died" in lr.message
    assert "line_search_fn='strong_wolfe'" in lr.advice and "1000" not in lr.advice
    assert "healthy" not in lr.message  # no ratio is healthy for a quasi-Newton step
