"""A learning rate below zero (GS488): torch's optimizers refuse one when built, not one a
schedule or the script writes later. A linear decay written as a lambda and stepped past
its end, and hypergradient descent with its update's sign flipped, ascend the loss; the
run said "No findings", or blamed a learning rate too high."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope

RULE = "GS488"


def _run(steps: int, adapt=None, schedule=None, start_lr: float = 3e-3) -> list:
    torch.manual_seed(0)
    x_all = torch.randn(256, 8)
    y_all = x_all @ torch.randn(8, 1)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    opt.param_groups[0]["lr"] = start_lr
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule) if schedule else None
    with gradscope.watch() as w:
        for step in range(steps):
            idx = torch.randint(0, 256, (32,))
            loss = F.mse_loss(model(x_all[idx]), y_all[idx])
            opt.zero_grad()
            loss.backward()
            if adapt is not None:
                opt.param_groups[0]["lr"] = adapt(step, opt.param_groups[0]["lr"])
            opt.step()
            if sched is not None:
                sched.step()
    return [f for f in w.report.findings if f.rule == RULE]


def test_a_linear_decay_stepped_past_its_end_is_named_with_its_scheduler():
    (found,) = _run(40, schedule=lambda s: 1 - s / 25)
    assert found.rule == "GS488"
    assert found.severity == gradscope.Severity.ERROR
    assert "LambdaLR" in found.message and "-1.20e-04 at step 27" in found.message
    assert "max(0.0" in found.advice
    assert found.steps == (27,)


def test_the_same_decay_clamped_at_zero_is_silent():
    assert _run(40, schedule=lambda s: max(0.0, 1 - s / 25)) == []


def test_an_lr_adapted_by_hand_across_zero_is_an_error_set_by_the_script():
    (found,) = _run(30, adapt=lambda step, lr: lr - 2e-4)
    assert found.severity == gradscope.Severity.ERROR
    assert "set by the script" in found.message
    assert "maximize=True" in found.advice


def test_an_ascent_set_by_hand_from_the_first_step_is_a_warning():
    (found,) = _run(10, start_lr=-1e-3)
    assert found.severity == gradscope.Severity.WARNING
    assert "from the first step" in found.message
