"""SAM's two backward calls a step with zero_grad between them are no wiped accumulation
(GS435): the first call's gradients moved the weights to w + e(w) in place before the reset
(their version counter says so), so they were used. The accumulation loop that resets inside
it is still named (tests/watcher/test_watch_silent_order.py)."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("base", ["sgd", "adam"])
def test_sams_ascent_between_two_backward_calls_is_not_a_wipe(base):
    report = watched("sam_steps.py", base)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    summary = report.to_dict()["summary"]["per_optimizer"]
    assert summary[-1]["steps"] == 40
