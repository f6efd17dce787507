"""`gradscope inspect` of a model (not a script) names a zero-derivative op on every path to
a parameter: a binarised layer without a straight-through estimator (`torch.sign`), a
quantiser's `round`, an STE written without its `.detach()`. Only `inspect --script` read
them; a model's inspect told their exact zeros as dead ReLUs or a mask. A sign with its
straight-through estimator, and a ReLU network, keep their readings."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope


class Binarised(nn.Module):
    """A BinaryConnect-style layer: its weights pass through `how` before they are used."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.fc1.weight
        if self.how == "sign":
            w = w.sign()
        elif self.how == "round":
            w = (w * 4).round() / 4
        elif self.how == "ste-undetached":
            w = w + (w.sign() - w)
        elif self.how == "ste":
            w = w + (w.sign() - w).detach()
        return self.fc2(torch.tanh(x @ w.t() + self.fc1.bias))


def _zero_finding(how: str):
    torch.manual_seed(0)
    report = gradscope.inspect(
        Binarised(how), torch.randn(32, 8), lambda out: out.logsumexp(1).mean()
    )
    return [f for f in report.findings if f.rule == "GS106" and "fc1.weight" in f.subject]


@pytest.mark.parametrize(
    ("how", "op"),
    [("sign", "torch.sign"), ("round", "torch.round"), ("ste-undetached", "x + (y - x)")],
)
def test_a_zero_derivative_op_is_named_in_a_models_inspect(how, op):
    (f,) = _zero_finding(how)
    said = f"{f.message} {' '.join(f.evidence)} {f.advice}"
    assert op in said and "dead ReLU" not in said, said


def test_a_straight_through_estimator_has_gradients():
    assert _zero_finding("ste") == []


class _LowerBound(torch.autograd.Function):
    """A lower bound whose backward passes the gradient where it would raise the value
    (CompressAI's LowerBound, which keeps GDN's beta positive)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=1e-3)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return ((x >= 1e-3) | (grad < 0)) * grad


class _BoundedUnderRound(nn.Module):
    """A gain kept positive by `_LowerBound`, under a quantiser's plain round (`rounded`) or its
    straight-through estimator."""

    def __init__(self, rounded: bool) -> None:
        super().__init__()
        self.rounded = rounded
        self.gain = nn.Parameter(torch.ones(8))
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = 4 * x * _LowerBound.apply(self.gain) ** 2
        y_hat = y.round() if self.rounded else y + (y.round() - y).detach()
        return self.head(y_hat)


@pytest.mark.parametrize("rounded", [True, False])
def test_a_custom_bound_under_a_plain_round_is_told_of_the_round(rounded):
    torch.manual_seed(0)
    report = gradscope.inspect(
        _BoundedUnderRound(rounded), torch.randn(32, 8), lambda out: out.logsumexp(1).mean()
    )
    found = [f for f in report.findings if f.rule == "GS106" and f.subject == "gain"]
    if not rounded:
        assert found == [], found
        return
    (f,) = found
    assert "through torch.round" in f.message and "_LowerBound" not in f.advice, f
