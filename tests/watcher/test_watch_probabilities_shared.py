"""GS431 once for one loss: a wide-and-deep model whose two parts have optimizers of their
own (Adagrad on the wide part, Adam on the deep one, as DeepFM's code does) and one loss
fed a sigmoid before binary_cross_entropy_with_logits: one finding, which names the other
optimizer the same backward trains, not one per optimizer."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope as gs


def _wide_and_deep(squash) -> list:
    torch.manual_seed(0)
    wide, deep = nn.Linear(8, 1), nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opts = [torch.optim.Adagrad(wide.parameters(), 0.05), torch.optim.Adam(deep.parameters())]
    x = torch.randn(64, 8)
    y = (x[:, 0] > 0).float()
    with gs.watch() as w:
        for _ in range(5):
            for o in opts:
                o.zero_grad()
            logits = (wide(x) + deep(x)).squeeze(1)
            F.binary_cross_entropy_with_logits(squash(logits), y).backward()
            for o in opts:
                o.step()
    return [f for f in w.report.findings if f.rule == "GS431"]


def test_one_loss_fed_probabilities_that_trains_two_optimizers_is_named_once():
    (f,) = _wide_and_deep(torch.sigmoid)
    assert "optimizer 0 (Adagrad" in f.subject and "double sigmoid" in f.message
    assert "trains optimizer 1 (Adam" in f.evidence[-1]
    assert _wide_and_deep(lambda logits: logits) == []  # the raw logits: nothing to name
