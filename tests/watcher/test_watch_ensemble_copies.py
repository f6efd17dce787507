"""Deep-ensemble members that are copies of one network fed one data order (GS464): four
optimizers with the same loss and gradient norms at every step, one model trained four
times, were given a clean verdict. Members built anew, or copies shuffled apart, differ from
the first step and stay silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def _loud(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def test_members_copied_and_fed_one_order_are_named_once():
    report = domain_watched("ensemble_members.py", "copies")
    (found,) = [f for f in report.findings if f.rule == "GS464"]
    assert found.severity == Severity.WARNING
    assert "optimizer 0" in found.subject and "optimizer 2" in found.subject
    assert "deepcopy" in found.advice
    assert _loud(report) == [found]


@pytest.mark.parametrize("mode", ["healthy", "shuffled_copies"])
def test_members_that_differ_stay_silent(mode):
    report = domain_watched("ensemble_members.py", mode)
    assert _loud(report) == [], [f.message for f in _loud(report)]
