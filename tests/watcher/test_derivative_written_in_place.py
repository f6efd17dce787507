"""A learned optimizer (L2O in small: a coordinatewise update rule meta-trained on the sum of
the optimizee's losses) whose optimizee weights are updated in place under no_grad: the
update leaves the graph and the rule gets no gradient. GS467 names that update, not a
missing create_graph (which would not help). The same unroll built out of place is
healthy; forces taken without create_graph keep their advice (test_watch_derivative_cut)."""

from __future__ import annotations

import torch
from torch import nn

import gradscope


def _l2o(in_place: bool):
    torch.manual_seed(0)
    rule = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
    meta = torch.optim.Adam(rule.parameters(), lr=1e-3)
    a, b = torch.randn(6, 6), torch.randn(6)
    with gradscope.watch() as w:
        for _ in range(4):
            theta, meta_loss = torch.randn(6, requires_grad=True), 0.0
            for _ in range(5):
                loss = ((a @ theta - b) ** 2).sum()
                meta_loss = meta_loss + loss
                (g,) = torch.autograd.grad(loss, theta, retain_graph=True)
                step = 0.01 * rule(torch.stack([g, g.sign()], 1)).squeeze(1)
                if in_place:
                    with torch.no_grad():
                        theta.add_(step)
                else:
                    theta = theta + step
            meta.zero_grad()
            meta_loss.backward()
            meta.step()
    return [f for f in w.report.findings if f.rule == "GS467"]


def test_an_update_written_in_place_is_named_as_the_cut():
    (found,) = _l2o(in_place=True)
    assert "wrote in place" in found.message and "out of place" in found.advice
    assert "create_graph" not in found.advice


def test_the_unroll_built_out_of_place_is_not_this():
    assert _l2o(in_place=False) == []
