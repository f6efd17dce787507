"""GS413 counts the steps a parameter could have learned at: those of the optimizers that
hold it. Learning from Failure steps a biased model and a debiased one, each by its own
Adam, once per iteration; with the biased model's logits detached from its own loss, it
got no gradient in its optimizer's 6 steps, not in the run's 12."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _never_updated(own_optimizers: bool) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    biased, debiased = nn.Linear(4, 2), nn.Linear(4, 2)
    if own_optimizers:
        opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (biased, debiased)]
    else:
        opts = [torch.optim.Adam([*biased.parameters(), *debiased.parameters()], lr=1e-2)]
    with gradscope.watch() as w:
        for _ in range(6):
            x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
            logit_b = biased(x).detach()  # the planted bug: cut from its own loss
            per_b = F.cross_entropy(logit_b, y, reduction="none")
            per_d = F.cross_entropy(debiased(x), y, reduction="none")
            weight = per_b / (per_b + per_d.detach() + 1e-8)
            loss = per_b.mean() + (per_d * weight).mean()
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_model_with_its_own_optimizer_is_counted_by_that_optimizers_steps():
    found = _never_updated(own_optimizers=True)
    assert len(found) == 2  # the biased model's weight and bias
    assert all("in all 6 steps" in f.message for f in found), [f.message for f in found]


def test_one_optimizer_holding_both_counts_its_steps():
    found = _never_updated(own_optimizers=False)
    assert len(found) == 2
    assert all("in all 6 steps" in f.message for f in found), [f.message for f in found]
