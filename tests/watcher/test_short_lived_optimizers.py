"""Reptile (Nichol et al.): each task adapts a deep copy of the model for 5 SGD steps with
its own optimizer at the reference inner lr (0.02 on sine regression), and the outer Adam
steps on the weight difference written into .grad. The inner optimizers' large moves are
few-shot adaptation, their purpose: no GS409/GS419 for them. The outer optimizer is still
judged: at an Adam lr of 1 (above its weights' size) GS419 fires on it; so is an Adam
re-created at every step (one step each is no loop to adapt in)."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _reptile(outer_lr: float, iterations: int = 40):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
    outer = torch.optim.Adam(net.parameters(), lr=outer_lr)
    with gradscope.watch() as w:
        for _ in range(iterations):
            amp, phase = 0.1 + 4.9 * torch.rand(1), math.pi * torch.rand(1)
            x = torch.empty(50, 1).uniform_(-5, 5)
            y = amp * torch.sin(x + phase)
            clone = copy.deepcopy(net)
            inner = torch.optim.SGD(clone.parameters(), lr=0.02)
            for _ in range(5):
                idx = torch.randperm(50)[:10]
                inner.zero_grad()
                F.mse_loss(clone(x[idx]), y[idx]).backward()
                inner.step()
            outer.zero_grad()
            for p, q in zip(net.parameters(), clone.parameters(), strict=True):
                p.grad = (p.data - q.data) / 0.02
            outer.step()
    return w.report


def _loud(report) -> list[tuple[str, str]]:
    loud = [f for f in report.findings if f.severity >= gradscope.Severity.WARNING]
    return [(f.rule, f.subject) for f in loud]


def test_reptiles_inner_optimizers_are_not_judged_by_steady_state_ratios():
    assert _loud(_reptile(1e-3)) == []


def test_an_outer_lr_far_too_high_beside_them_still_fires():
    report = _reptile(1.0, iterations=24)
    assert any(f.rule == "GS419" and "Adam" in f.subject for f in report.findings), _loud(report)


def test_adam_re_created_at_every_step_with_an_lr_far_too_high_still_fires():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
    target = torch.randn(20, 5)
    with gradscope.watch() as w:
        for _ in range(30):
            opt = torch.optim.Adam(model.parameters(), lr=0.1)  # one step each: no inner loop
            x = torch.randn(64, 20)
            opt.zero_grad()
            F.cross_entropy(model(x), (x @ target).argmax(1)).backward()
            opt.step()
    assert "GS419" in [f.rule for f in w.report.findings]
