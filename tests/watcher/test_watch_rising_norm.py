"""A gradient norm that rises with a schedule's lr (OneCycle's ramp, a warm-up to a high
peak) to a level it holds while the loss falls is a trend, not a spike (GS403): a spike
comes back. One corrupted batch in the same run still is one."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("kind", ["onecycle", "warmup"])
def test_a_norm_that_rises_with_the_lr_and_holds_is_no_spike(kind):
    report = watched("rising_norm.py", kind)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    steps = report.run.steps
    assert max(r.grad_norm for r in steps) > 2.5 * steps[0].grad_norm  # it did rise


def test_a_corrupted_batch_in_the_same_run_is_still_a_spike():
    report = watched("rising_norm.py", "bad_batch")
    spike = [f for f in report.findings if f.rule == "GS403"]
    assert spike and spike[0].severity == Severity.WARNING, report.findings
    assert "step 70" in spike[0].message
