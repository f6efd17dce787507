"""GS410 on a tensor whose gradient stays below Adam's eps: pytorch-forecasting feeds the
target back as an input (TimeSeriesDataSet's time_varying_unknown_reals), and with its
target normaliser left out (TorchNormalizer(method="identity")) a target at 1e4 saturates
a RecurrentNetwork's LSTM gates, whose first layer then gets gradients of 1e-16..1e-20.
Adam's step lr·m̂/(√v̂+eps) is then lr·g/eps ≈ 0: the finding names the vanished
gradient, not a learning rate too small. A learning rate that is too small, under Adam or
SGD, is still named as that."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope


def _update_ratio_low(case: str) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    first, head = nn.Linear(4, 8), nn.Linear(8, 64)  # most of the elements still learn
    model = nn.Sequential(first, head)
    if case == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=1e-14)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-14 if case == "small lr" else 1e-2)
    x, y = torch.randn(32, 4), torch.randn(32, 64)
    gain = 1e-18 if case == "vanished" else 1.0  # a saturated unit's derivative
    with gradscope.watch() as w:
        for _ in range(30):
            loss = nn.functional.mse_loss(head(first(x) * gain + 1.0), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS410"]


def test_a_gradient_below_adams_eps_is_named_not_the_learning_rate():
    found = _update_ratio_low("vanished")
    assert {f.subject for f in found} == {"0.weight", "0.bias"}, [f.message for f in found]
    assert all("below Adam's eps" in f.message and "saturated" in f.advice for f in found)


@pytest.mark.parametrize("case", ["small lr", "sgd"])
def test_a_learning_rate_too_small_is_still_named(case):
    found = _update_ratio_low(case)
    assert found and all("learning rate is far too small" in f.message for f in found), [
        f.message for f in found
    ]
