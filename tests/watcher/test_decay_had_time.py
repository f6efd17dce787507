"""GS420 reads an L2 decay's equilibrium |grad| / wd from the gradients it measured; a loss
fitted to ~0 (easy data, the classes of a continual-learning task) leaves tiny gradients,
so that equilibrium reads small whatever the decay. The decay erased nothing unless it had
the steps to: SGD's stock 5e-4 at lr 0.05 halves the weights in ~2800 steps, not in 120.
A decay strong enough to act within the run still fires."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _fit(weight_decay: float, steps: int = 120) -> list[str]:
    torch.manual_seed(0)
    centers = torch.randn(4, 10) * 3
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=weight_decay)
    with gradscope.watch() as w:
        for _ in range(steps):
            y = torch.randint(0, 4, (32,))
            loss = F.cross_entropy(model(centers[y] + 0.3 * torch.randn(32, 10)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f.rule for f in w.report.findings]


def test_a_fitted_loss_under_sgds_stock_decay_is_not_erased_weights():
    assert "GS420" not in _fit(5e-4)


def test_a_decay_that_halves_the_weights_every_few_steps_still_fires():
    assert "GS420" in _fit(2.0)
