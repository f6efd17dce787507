"""A gradient made large by its loss's units, not by the network (a force field's energy MSE
plus 100 x a force MSE, 805 at its first step: GS104 called a grad RMS of 245 exploding
against the absolute bound). The signal is largest at the output and shrinks on its way back
to the input, so the absolute bounds are judged per unit of the loss; an explosion, whose
signal grows on its way back, still fires at whatever loss."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gradscope
from gradscope import Severity
from tests.watcher.watch_scripts import DOMAINS


def _mlp(depth: int, gain: float, act: type[nn.Module] = nn.Tanh) -> nn.Sequential:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(1 if i == 0 else 16, 16), act()]
    model = nn.Sequential(*layers, nn.Linear(16, 1))
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=gain / m.in_features**0.5)
    return model


def _exploding(report) -> list[str]:
    return [f.subject for f in report.findings if f.slug == "exploding"]


def test_a_force_fields_large_loss_is_not_an_explosion():
    script = os.path.join(DOMAINS, "derivative_losses.py")
    report = gradscope.inspect_script(script, ["forces", "2"])
    assert report.stats.loss_value > 100  # the units made it large
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings


@pytest.mark.parametrize("units", [1e3, 1e5])
def test_a_target_in_large_units_is_judged_per_unit_of_the_loss(units):
    x = torch.linspace(-1, 1, 64)[:, None]
    report = gradscope.inspect(_mlp(3, 1.0), x, lambda out: F.mse_loss(out, units * x**2))
    assert _exploding(report) == [], report.findings


@pytest.mark.parametrize("act, gain", [(nn.Identity, 2.0), (nn.ReLU, 3.0)])
def test_an_explosion_through_depth_still_fires_at_a_large_loss(act, gain):
    """Every layer multiplies the signal: it grows on its way back to the input."""
    x = torch.linspace(-1, 1, 64)[:, None]
    report = gradscope.inspect(_mlp(8, gain, act), x, lambda out: F.mse_loss(out, 1e3 * x**2))
    assert report.stats.loss_value > 1e5
    assert "0.weight" in _exploding(report), report.findings
    assert "per unit of the loss" not in " ".join(f.message for f in report.findings)


def test_the_deep_example_still_fires():
    from gradscope.examples.models import exploding_deep

    model, x, loss_fn = exploding_deep()
    assert {"0.weight", "0.bias"} <= set(_exploding(gradscope.inspect(model, x, loss_fn)))
