"""Weights stored in bfloat16 or float16 and stepped there (model.to(torch.bfloat16) with
AdamW): a step below the dtype's spacing rounds back to the weight, so a LayerNorm scale
near 1 under lr 1e-3 never moves. GS410 names the rounding, not the learning rate; the
same loop in float32, or with a learning rate whose steps survive the rounding, is not
judged."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope


def _trained(dtype: torch.dtype, lr: float):
    """AdamW for bfloat16 (a step of about lr); plain SGD for float16, where Adam's
    second moment underflows."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 1)).to(dtype)
    if dtype == torch.float16:
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    w = torch.randn(8, 1)
    with gradscope.watch() as watched:
        for _ in range(60):
            x = torch.randn(32, 8)
            loss = (model(x.to(dtype)).float() - x @ w).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    report = watched.report
    assert not report.faults
    return [f for f in report.findings if f.rule == "GS410"]


@pytest.mark.parametrize(("dtype", "lr"), [(torch.bfloat16, 1e-3), (torch.float16, 1e-4)])
def test_a_half_precision_scale_that_rounds_its_steps_away_is_named_by_its_dtype(dtype, lr):
    found = [f for f in _trained(dtype, lr) if f.subject == "1.weight"]  # LayerNorm's scale
    name = str(dtype).removeprefix("torch.")
    assert len(found) == 1  # |w| = 1, each step below half the spacing there
    assert name in found[0].message and "rounds back" in found[0].message
    assert "float32" in found[0].advice and "autocast" in found[0].advice
    assert "far too small" not in found[0].message


@pytest.mark.parametrize(("dtype", "lr"), [(torch.float32, 1e-3), (torch.bfloat16, 3e-2)])
def test_float32_weights_or_steps_larger_than_the_spacing_are_not_judged(dtype, lr):
    assert _trained(dtype, lr) == []
