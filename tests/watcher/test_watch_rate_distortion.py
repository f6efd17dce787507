"""GS413 in learned compression: a plain torch.round in training gives the encoder exact
zeros along every path, the reconstruction's and the rate's; the rate's path also runs
through the likelihood's LowerBound, a custom Function that passes the gradient on. The
finding names the round, whose zeros are certain, not the bound. Uniform noise and a
straight-through round are silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["noise", "ste"])
def test_noise_or_a_straight_through_round_is_silent(mode):
    report = domain_watched("rate_distortion.py", mode)
    assert not report.faults, report.internal_error()
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], report.findings


def test_a_plain_round_is_named_over_the_likelihood_bound():
    report = domain_watched("rate_distortion.py", "round")
    assert not report.faults, report.internal_error()
    never = {f.subject: f for f in report.findings if f.rule == "GS413"}
    assert {"encode.0.weight", "encode.2.weight"} <= set(never), report.findings
    for name in ("encode.0.weight", "encode.2.weight"):
        assert "through torch.round" in never[name].message, never[name].message
        assert "LowerBound" not in never[name].advice
