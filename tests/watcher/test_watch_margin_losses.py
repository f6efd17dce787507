"""Objectives that reach exactly 0 or cancel a bias by structure (scripts/margin_losses.py):
a met margin's zero loss and zero gradients are convergence, not dead units, a stall, a
spike over a median of 0, or a cut graph; a bias whose outputs are subtracted away is
redundant, said as information. The look-alike bugs keep their warning."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow


def _at_least_warning(report):
    return [f for f in report.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("mode", ["triplet", "siamese", "rank", "svm"])
def test_a_met_margin_or_a_cancelled_bias_is_no_warning(mode):
    report = watched("margin_losses.py", mode)
    assert _at_least_warning(report) == [], report.findings
    assert not {f.rule for f in report.findings} & {"GS402", "GS403", "GS405", "GS419"}


@pytest.mark.parametrize(
    ("mode", "rule"), [("triplet", "GS417"), ("siamese", "GS413"), ("rank", "GS413")]
)
def test_the_cancelled_bias_is_named_with_its_mechanism(mode, rule):
    (finding,) = watched("margin_losses.py", mode).findings
    assert (finding.rule, finding.subject, finding.severity) == (rule, "2.bias", Severity.INFO)
    assert "while 2.weight learned" in finding.message
    assert "shift by one amount" in finding.message and "bias=False" in finding.advice


@pytest.mark.parametrize("mode", ["cut", "round"])
def test_a_head_cut_from_the_loss_or_rounded_still_warns(mode):
    found = {(f.rule, f.subject, f.severity) for f in watched("margin_losses.py", mode).findings}
    assert found == {
        ("GS413", "Linear.weight", Severity.WARNING),
        ("GS413", "Linear.bias", Severity.WARNING),
    }
