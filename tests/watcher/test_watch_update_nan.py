"""GS439: an update that made NaN out of finite gradients is named at its step, as the
cause of the NaN loss after it (GS401), with its mechanism: float16 weights under Adam,
whose eps 1e-8 is 0 in float16, or a learning rate that is NaN. The advice (eps 1e-4)
makes the float16 run healthy; bfloat16 weights under Adam are healthy as they are."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow


def test_float16_weights_under_adam_are_named_at_step_1_as_the_nans_cause():
    report = watched("update_nan.py", "half-adam")
    first = report.findings[0]
    assert (first.rule, first.severity, first.steps) == ("GS439", Severity.ERROR, (1,))
    assert "float16" in first.message and "eps 1.00e-08 rounds to 0" in first.message
    assert "eps of 1e-4" in first.advice
    (nan,) = [f for f in report.findings if f.rule == "GS401"]
    assert nan.explained_by == "GS439:update"
    assert report.to_dict()["params"][0]["dtype"] == "float16"


def test_a_nan_learning_rate_is_named_at_its_step():
    report = watched("update_nan.py", "nan-lr")
    (f,) = [f for f in report.findings if f.rule == "GS439"]
    assert f.steps == (5,) and "learning rate was nan" in f.message


@pytest.mark.parametrize("mode", ["half-eps", "bf16-adam"])
def test_the_advice_and_bfloat16_are_healthy(mode):
    report = watched("update_nan.py", mode)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
