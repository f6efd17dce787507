"""Gradients of exact zeros all run, with nothing more specific to explain them: a BPR loss
whose sampled negative is the positive itself (s(u, i) - s(u, i) cancels), or a score read
through a mask of zeros. GS413 told the user to check that the tables take part in the
loss and to look for where the graph is cut: they do, and it is not. It now names the
cancelling terms; a table cut from the loss (None, not zeros) keeps the graph's advice,
and the same model with a real negative is silent."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope as gs


def _bpr(negative: str):
    torch.manual_seed(0)
    user, item = nn.Embedding(12, 4), nn.Embedding(20, 4)
    opt = torch.optim.Adam([*user.parameters(), *item.parameters()], lr=1e-2)
    with gs.watch() as w:
        for _ in range(10):
            u, i = torch.randint(0, 12, (16,)), torch.randint(0, 10, (16,))
            j = i if negative == "positive" else torch.randint(10, 20, (16,))
            eu = user(u).detach() if negative == "cut" else user(u)
            x = (eu * item(i)).sum(-1) - (eu * item(j)).sum(-1)
            if negative == "masked":
                x = x * torch.zeros_like(x)
            loss = -F.logsigmoid(x).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_terms_that_cancel_are_named_not_a_cut_graph():
    for negative in ("positive", "masked"):
        found = _bpr(negative)
        assert sorted(f.subject for f in found) == ["Embedding.weight", "Embedding2.weight"]
        for f in found:
            assert "only zero gradients" in f.message
            assert "terms that cancel" in f.advice and "graph is cut" not in f.advice


def test_a_cut_table_keeps_the_graphs_advice_and_a_real_negative_is_silent():
    (cut,) = _bpr("cut")
    assert "no gradient (None)" in cut.message
    assert "takes part in the loss" in cut.advice
    assert _bpr("sampled") == []
