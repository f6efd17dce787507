"""Hypergradient descent by hand (Baydin et al.: Adam-HD on torch's Adam): at every step the
lr moves by β times the dot product of the gradient and Adam's previous step direction, up
and down by a fraction of a percent. No GS458: that is no per-batch rescale compounding.
The same loop multiplying the lr by a per-batch factor it never restores still fires."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _adam_hd(compounded: bool, steps: int = 60):
    torch.manual_seed(0)
    draw = random.Random(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=1e-3)
    x = torch.randn(steps, 32, 6)
    y = torch.sin(x.sum(-1, keepdim=True)) + torch.randn(steps, 32, 1)  # noisy labels
    direction = None
    with gradscope.watch() as w:
        for i in range(steps):
            opt.zero_grad()
            F.mse_loss(model(x[i]), y[i]).backward()
            group = opt.param_groups[0]
            if compounded:  # a per-batch factor written back and never restored
                group["lr"] *= max(5, round(draw.gauss(20, 5))) / 20
            elif direction is not None:
                h = sum(float((p.grad * d).sum()) for p, d in zip(params, direction, strict=True))
                group["lr"] = max(group["lr"] + 3e-6 * h, 1e-5)
            before = [p.detach().clone() for p in params]
            opt.step()
            direction = [
                (b - p.detach()) / group["lr"] for b, p in zip(before, params, strict=True)
            ]
    return [f for f in w.report.findings if f.rule == "GS458"]


def test_an_lr_adapted_online_by_its_hypergradient_is_not_compounded():
    assert _adam_hd(compounded=False) == []


def test_a_per_batch_factor_never_restored_still_fires():
    assert len(_adam_hd(compounded=True)) == 1
