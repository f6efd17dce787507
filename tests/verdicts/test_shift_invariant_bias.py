"""One step of a siamese distance and of a pairwise ranking score, where the shared net's
last bias cancels in the difference of its outputs: its gradient is exactly zero while its
weight's is not (plain autograd is the oracle), which is information with its mechanism
(GS106), not a dead unit. A bias zero because its layer's units are dead still warns."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope
from gradscope import Severity


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Linear(48, 8))

    def forward(self, a, b):
        return self.net(a) - self.net(b)


def _contrastive(diff, same):
    d = diff.norm(dim=1)
    return (same * d.pow(2) + (1 - same) * torch.relu(2.0 - d).pow(2)).mean()


def _ranking(diff, y):
    return nn.functional.margin_ranking_loss(diff[:, 0], torch.zeros_like(y), y, margin=0.5)


def _plain(model, batch, loss_fn):
    model.zero_grad(set_to_none=True)
    loss_fn(model(*batch)).backward()
    got = {n: p.grad.abs().max().item() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return got


def test_a_cancelled_bias_is_information_with_its_mechanism():
    torch.manual_seed(0)
    a, b = torch.randn(64, 24), torch.randn(64, 24)
    same = (torch.rand(64) < 0.5).float()
    y = torch.sign(torch.randn(64))
    for loss_fn in (lambda d: _contrastive(d, same), lambda d: _ranking(d, y)):
        model = Pair()
        truth = _plain(model, (a, b), loss_fn)
        assert truth["net.2.bias"] == 0 and truth["net.2.weight"] > 0  # the premise
        report = gradscope.inspect(model, (a, b), loss_fn)
        (f,) = [f for f in report.findings if f.rule == "GS106"]
        assert f.subject == "net.2.bias" and f.severity == Severity.INFO
        assert "while net.2.weight has a gradient" in f.message and "bias=False" in f.advice
        assert [x for x in report.findings if x.severity >= Severity.WARNING] == []


def test_a_bias_of_dead_units_still_warns():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    with torch.no_grad():
        model[0].bias.fill_(-100.0)  # every unit off
    report = gradscope.inspect(model, torch.randn(32, 8), lambda y: y.pow(2).mean())
    warned = {f.subject for f in report.findings if f.rule == "GS106"}
    assert {"0.weight", "0.bias"} <= warned
    assert all(f.severity == Severity.WARNING for f in report.findings if f.rule == "GS106")


@pytest.mark.parametrize(
    ("wrap", "weight"),
    [
        (nn.utils.parametrizations.spectral_norm, "net.2.parametrizations.weight.original"),
        (nn.utils.spectral_norm, "net.2.weight_orig"),
        (nn.utils.parametrizations.weight_norm, "net.2.parametrizations.weight.original1"),
    ],
)
def test_a_cancelled_bias_beside_a_parametrized_weight_is_information(wrap, weight):
    """The layer's weight trained through a parametrization or a norm's hook (an EBM's or
    a WGAN critic's spectral norm): the tensor it trains stands for the weight."""
    torch.manual_seed(0)
    model = Pair()
    model.net[2] = wrap(model.net[2])
    a, b = torch.randn(64, 24), torch.randn(64, 24)
    report = gradscope.inspect(model, (a, b), lambda d: d.pow(2).mean())
    (f,) = [f for f in report.findings if f.rule == "GS106"]
    assert f.subject == "net.2.bias" and f.severity == Severity.INFO, f
    assert f"while {weight} has a gradient" in f.message
