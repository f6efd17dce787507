"""Optimal-transport losses in training (domain_scripts/ot_losses.py): an entropic OT
loss whose minimum is not 0, unrolled Sinkhorn iterations (a long graph), a plan detached
on purpose, random projections each step (a noisy loss), a Chamfer distance. Healthy: no
warning or error."""

from __future__ import annotations

import pytest
from watch_scripts import domain_watched

from gradscope.findings import Severity


@pytest.mark.parametrize("mode", ["unrolled", "envelope", "sliced", "chamfer"])
def test_ot_losses_that_train_are_not_flagged(mode):
    report = domain_watched("ot_losses.py", mode, "30")
    assert report.run.status == "completed" and len(report.run.steps) == 30
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == []
