"""DeepAR's Gaussian NLL with a learned sigma: as sigma shrinks the gradient grows as 1/sigma², and
the norm moves from ~1 to a noisy level near 15 while the loss falls. The new level's steps
are no spikes (GS403) and no Adam lag (GS451); a corrupted batch on that level is named at
its step by both."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

pytestmark = pytest.mark.slow


def _warnings(report, *rules):
    return [f for f in report.findings if f.rule in rules and f.severity >= Severity.WARNING]


def test_deepar_whose_sigma_sharpens_has_no_spike():
    report = domain_watched("deepar_nll.py")
    assert _warnings(report, "GS403", "GS451") == [], report.findings
    norms = [r.grad_norm for r in report.run.steps]
    assert max(norms[-40:]) > 10 * max(norms[:40])  # it did move to a new level


def test_a_corrupted_deepar_batch_on_the_new_level_is_named_at_its_step():
    report = domain_watched("deepar_nll.py", "bad_batch")
    for rule in ("GS403", "GS451"):
        (f,) = _warnings(report, rule)
        assert "step 150" in f.message, (rule, f.message)
