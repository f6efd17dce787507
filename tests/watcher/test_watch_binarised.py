"""GS413 on a binarised or quantised layer: weights reached only through torch.sign or
torch.round got exact zeros, which is torch's derivative of a step function, not a cut
graph; the finding names the op and the straight-through estimator instead of asking
whether the weight takes part in the loss. A custom Function whose backward returns zeros
is named too. The healthy estimators (a custom Function, the detach trick) are silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def _never(mode: str) -> dict[str, object]:
    report = domain_watched("binarised.py", mode)
    assert not report.faults, report.internal_error()
    return {f.subject: f for f in report.findings if f.rule == "GS413"}


@pytest.mark.parametrize("mode", ["ste", "detach"])
def test_a_straight_through_estimator_is_silent(mode):
    report = domain_watched("binarised.py", mode)
    assert not report.faults, report.internal_error()
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], report.findings


def test_plain_sign_names_the_op_and_the_estimator():
    never = _never("sign")
    assert list(never) == ["Sequential.3.weight"]  # activations pass through hardtanh
    f = never["Sequential.3.weight"]
    assert f.severity == Severity.WARNING
    assert "through torch.sign, whose derivative is 0" in f.message
    assert "straight-through estimator" in f.advice
    assert "takes part in the loss" not in f.advice


def test_plain_round_names_the_quantiser_for_everything_below_it():
    never = _never("round")
    assert "Sequential.0.weight" in never and "head.weight" not in never
    assert all("through torch.round" in f.message for f in never.values())


def test_a_custom_function_that_returns_zeros_is_named():
    never = _never("blocked")
    assert list(never) == ["Sequential.3.weight"]
    f = never["Sequential.3.weight"]
    assert "custom autograd.Function SignSTE" in f.message
    assert "SignSTE.backward" in f.advice


def test_a_library_function_is_trusted_where_the_users_own_is_named():
    """A checkpoint's (or a fused kernel's) custom Function wraps whole blocks: a weight with
    zero gradients below one is not told to check that Function's backward."""
    import torch
    from torch.utils.checkpoint import checkpoint

    from gradscope.autograd_walk import NodeWalk, flat_op

    class Halve(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x / 2

        @staticmethod
        def backward(ctx, grad):
            return grad / 2

    layer = torch.nn.Linear(3, 3)
    x = torch.randn(2, 3, requires_grad=True)
    wrapped = checkpoint(layer, x, use_reentrant=True).sum() + Halve.apply(x).sum()
    ops = {flat_op(n) for n in NodeWalk([wrapped.grad_fn])} - {None}
    assert ops == {"Function Halve"}
