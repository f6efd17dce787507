"""The loss under a dynamic loss scale kept by hand (float16 training without GradScaler):
the backward runs on `loss * S`, S a power of two doubled after good steps and halved on
overflow. The loss was recorded with S in it, so a scale that grew read as a loss that
rose in the first steps (an early blow-up, GS414, or an lr too high, GS419) on a run that
learned; each step's loss is recorded in the first step's scale now. A constant scale
keeps its values, and a weight that is no power of two (a return the data sets) is
recorded as it came."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope


def _watched(scales: list[float]):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
    raw = []
    with gradscope.watch() as w:
        for scale in scales:
            loss = F.cross_entropy(model(x), y)
            raw.append(loss.item())
            opt.zero_grad(set_to_none=True)
            (loss * scale).backward()
            grads = [p.grad for p in model.parameters()]
            torch._foreach_div_(grads, scale)
            opt.step()
    losses = [r.loss for r in w.report.run.steps]
    return w.report, raw, losses


def test_a_growing_hand_scale_is_no_blowup():
    report, raw, losses = _watched([2.0 ** (3 + step // 2) for step in range(30)])
    assert [f.rule for f in report.findings if f.severity.value >= 20] == []
    assert losses == pytest.approx([v * 8.0 for v in raw], rel=1e-5)


def test_a_constant_scale_keeps_its_values():
    _, raw, losses = _watched([128.0] * 12)
    assert losses == pytest.approx([v * 128.0 for v in raw], rel=1e-6)


def test_a_weight_that_is_no_power_of_two_is_recorded_as_it_came():
    weights = [1.0 + 0.3 * (step % 4) for step in range(12)]
    _, raw, losses = _watched(weights)
    assert losses == pytest.approx([v * k for v, k in zip(raw, weights, strict=True)], rel=1e-6)
