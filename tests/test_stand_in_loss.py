"""inspect without a loss_fn stands in the output's mean; where every slice of the output
along a dim sums to one value (a softmax's rows, a LayerNorm's, a training BatchNorm's
columns) that mean is the same for any input, and a model of healthy layers read as
vanishing gradients with advice to drop its tanh. A fixed ramp of weights stands in there;
a model whose gradient really vanishes, and a plain output, are judged as before."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


def _warnings(model: nn.Module, x: torch.Tensor) -> list[str]:
    report = gradscope.inspect(model, x)
    return [f.rule for f in report.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize(
    "last",
    [nn.Softmax(dim=1), nn.LayerNorm(4), nn.BatchNorm1d(4)],
    ids=["softmax", "layernorm", "batchnorm"],
)
def test_a_normalised_output_gives_a_stand_in_loss_with_a_gradient(last):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4), last)
    x = torch.randn(3, 6)
    assert _warnings(model, x) == []
    source = gradscope.inspect(model, x).stats.loss_source
    assert "fixed ramp" in source and ("dim 1" in source or "dim 0" in source)


def test_a_really_vanishing_gradient_under_a_softmax_is_still_named():
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(6):
        lin = nn.Linear(8, 8)
        nn.init.normal_(lin.weight, std=8.0)
        layers += [lin, nn.Sigmoid()]
    model = nn.Sequential(*layers, nn.Linear(8, 4), nn.Softmax(dim=1))
    assert "GS105" in _warnings(model, torch.randn(3, 8))


def test_a_plain_output_keeps_its_plain_mean():
    model = nn.Linear(6, 4)
    x = torch.randn(3, 6)
    report = gradscope.inspect(model, x)
    assert report.stats.loss_value == pytest.approx(float(model(x).detach().mean()))
    assert "ramp" not in report.stats.loss_source
