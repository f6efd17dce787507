"""GS106 in one pass of a binarised or quantised layer: weights the loss reaches only through
torch.sign or torch.round have all-zero gradients by torch's definition of a step function's
derivative, and a custom Function's backward that returns zeros blocks the same way; the
finding names the op and the straight-through estimator (it said to look for dead ReLUs).
The healthy estimators are silent."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

BINARISED = os.path.join(DOMAINS, "binarised.py")


def _zero(mode: str):
    import gradscope

    found = gradscope.inspect_script(BINARISED, [mode]).findings
    return found, {f.subject: f for f in found if f.rule == "GS106"}


@pytest.mark.parametrize("mode", ["ste", "detach"])
def test_a_straight_through_estimator_is_silent(mode):
    found, _ = _zero(mode)
    assert [f for f in found if f.severity >= Severity.WARNING] == [], found


@pytest.mark.parametrize(("mode", "op"), [("sign", "torch.sign"), ("round", "torch.round")])
def test_a_step_function_is_named_with_the_estimator(mode, op):
    _, zero = _zero(mode)
    assert "Sequential.3.weight" in zero, zero
    assert all(f"through {op}, whose derivative is 0" in f.message for f in zero.values())
    assert all("straight-through estimator" in f.advice for f in zero.values())
    assert not any("dead ReLU" in f.advice for f in zero.values())


def test_a_custom_function_that_returns_zeros_is_named():
    _, zero = _zero("blocked")
    assert list(zero) == ["Sequential.3.weight"]
    assert "custom autograd.Function SignSTE" in zero["Sequential.3.weight"].message
