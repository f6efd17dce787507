"""A semi-supervised loss `supervised + w * consistency` whose weight never leaves 0 (a
ramp-up computed from a step that never advances): the consistency term trains nothing.
GS469 says so from the loss's graph; a ramp-up that starts at 0 and rises later, and a
weight that is never 0, stay silent."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.watcher import loss_graph

STEPS = 110  # the loss's kind is read again at step 101


def _consistency_run(weight_at) -> dict:
    torch.manual_seed(0)
    model = nn.Linear(6, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y, u = torch.randn(8, 6), torch.randint(0, 3, (8,)), torch.randn(16, 6)
    with gradscope.watch() as w:
        for step in range(STEPS):
            with torch.no_grad():
                target = model(u).softmax(-1)
            noisy = model(u + 0.1 * torch.randn_like(u)).softmax(-1)
            consistency = F.mse_loss(noisy, target)
            loss = F.cross_entropy(model(x), y) + weight_at(step) * consistency
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule: f for f in w.report.findings}


def test_a_weight_that_never_ramps_up_is_named():
    found = _consistency_run(lambda step: 10.0 * min(0 / 50, 1.0))["GS469"]
    assert "mse (mean)" in found.message and "multiplied by 0" in found.message
    assert "ramp-up" in found.advice


def test_a_ramp_up_from_zero_is_silent():
    assert "GS469" not in _consistency_run(lambda step: 10.0 * min(step // 50 / 2, 1.0))


def test_a_weight_never_zero_is_silent():
    assert "GS469" not in _consistency_run(lambda step: 1.0)


def test_a_zero_weight_takes_a_later_step_s_weight():
    sup = LossTerm("cross_entropy", "mean", 1.0)
    first = LossKind((sup, LossTerm("mse", "mean", 0.0)))
    later = LossKind((sup, LossTerm("mse", "mean", 2.5)))
    assert [t.factor for t in loss_graph.union(first, later).terms] == [1.0, 2.5]
    assert [t.factor for t in loss_graph.union(first, first).terms] == [1.0, 0.0]
