"""A gradient every backward filled and the script set to None before the step, all run
(DINO's cancel_gradients_last_layer with freeze_last_layer beyond the run): GS413 said
"check that it takes part in the loss", of a layer whose graph is whole. It now says the
script dropped it; the same drop for the first steps only (DINO's first epoch) is silent,
and a layer truly cut from the loss keeps the graph's advice."""

from __future__ import annotations

import torch
from torch import nn

import gradscope as gs


def _gs413(drop_steps: int, cut: bool = False):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    extra = nn.Linear(3, 3)  # a layer the loss may not reach
    opt = torch.optim.SGD([*model.parameters(), *extra.parameters()], lr=0.1)
    x = torch.randn(16, 4)
    with gs.watch() as w:
        for step in range(8):
            out = model(x)
            side = extra(out.detach()) if cut else extra(out)
            loss = (out.pow(2).mean() + side.pow(2).mean()) if not cut else out.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            if step < drop_steps:
                for p in model[2].parameters():
                    p.grad = None
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_gradient_dropped_by_the_script_all_run_is_told_as_dropped():
    found = _gs413(drop_steps=8)
    assert sorted(f.subject for f in found) == ["Sequential.2.bias", "Sequential.2.weight"]
    assert all("set it to None before the optimizer's step" in f.message for f in found)
    assert all("check the condition that drops its gradient" in f.advice for f in found)


def test_a_drop_for_the_first_steps_only_and_a_cut_graph_are_not_this():
    assert _gs413(drop_steps=2) == []
    cut = _gs413(drop_steps=0, cut=True)
    assert cut and all("takes part in the loss" in f.advice for f in cut)
