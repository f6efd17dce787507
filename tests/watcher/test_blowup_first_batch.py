"""A multi-task run (a hypernetwork fitting sine tasks of amplitude 0.1 to 5, one task a
step) whose first task happens to be an easy one: its step-1 loss is 30× below the next
steps', yet Adam at lr 1e-3 had moved the weights by under 1% before them; the first three
losses are three tasks of one model, not a rise, and the loss falls from there. GS414
called it an early blow-up that never recovered (an error). Adam at lr 1, whose first
step rewrites the weights, still blows up."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _hyper(lr: float) -> list[str]:
    torch.manual_seed(0)
    amps = torch.linspace(0.1, 5.0, 8)
    phases = torch.rand(8) * math.pi
    emb = nn.Embedding(8, 8)
    body = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32 + 32 + 32 + 1))
    opt = torch.optim.Adam([*emb.parameters(), *body.parameters()], lr=lr)
    x = torch.linspace(-5, 5, 40).unsqueeze(1)
    order = [0, *torch.randint(0, 8, (119,)).tolist()]  # the easiest task first
    with gradscope.watch() as w:
        for task in order:
            w1, b1, w2, b2 = (0.3 * body(emb(torch.tensor(task)))).split([32, 32, 32, 1])
            pred = F.linear(torch.tanh(x @ w1.unsqueeze(0) + b1), w2.unsqueeze(0), b2)
            loss = F.mse_loss(pred, amps[task] * torch.sin(x + phases[task]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f.rule for f in w.report.findings if f.severity >= gradscope.Severity.WARNING]


def test_an_easy_first_task_is_no_level_the_loss_blew_up_from():
    assert _hyper(1e-3) == []


def test_a_first_step_that_rewrites_the_weights_still_blows_up():
    assert "GS414" in _hyper(1.0)
