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
