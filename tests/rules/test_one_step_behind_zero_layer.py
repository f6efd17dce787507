"""Zeros at a run's only step behind a layer initialised to zero (GS413): a neural cellular
automaton's update rule starts as doing nothing (its last conv is zero), so its first conv
gets exact zeros at step 1 and real gradients from step 2 on. A run that ended after one
step (a crash at the second, --steps 1) named that first conv a parameter that never
learns. Zeros at the one step with no zero-initialised layer (a term multiplied by 0) are
still the warning."""

from __future__ import annotations

import torch
from torch import nn

import gradscope
from gradscope.findings import Severity


def _never_updated(how: str) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    if how == "zero layer":
        nn.init.zeros_(model[2].weight)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 6), torch.randn(16, 3)
    with gradscope.watch() as w:
        h = model[1](model[0](x))
        if how == "masked":
            h = h * 0.0
        loss = ((model[2](h) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_zeros_at_the_only_step_behind_a_zero_layer_are_information():
    found = _never_updated("zero layer")
    assert {f.subject for f in found} == {"0.weight", "0.bias"}
    assert all(f.severity is Severity.INFO and "2.weight" in f.message for f in found)


def test_zeros_at_the_only_step_with_no_zero_layer_are_still_the_warning():
    found = _never_updated("masked")
    assert found and all(f.severity is Severity.WARNING for f in found)
