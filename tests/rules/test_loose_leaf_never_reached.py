"""A tensor no module holds that no backward reached (GS413's advice): a simulation's
physical parameters rebuilt from their values each iteration (`torch.tensor(x.item(),
requires_grad=True)`), or a trajectory's controls created anew after the optimizer took
the first ones. The advice sent the user to `inspect --script`, which refuses a script with
no module; it now names the copy. A module's weight behind a cut keeps the inspect advice."""

from __future__ import annotations

import torch
from torch import nn

import gradscope


def _never_updated(how: str) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    rate = torch.tensor(0.0, requires_grad=True)
    layer = nn.Linear(3, 1)
    params = [rate] if how == "rebuilt" else [*layer.parameters()]
    opt = torch.optim.Adam(params, lr=1e-2)
    ts = torch.linspace(0, 1, 20)
    with gradscope.watch() as w:
        for _ in range(3):
            if how == "rebuilt":
                copy = torch.tensor(rate.item(), requires_grad=True)
                loss = ((torch.exp(-copy.exp() * ts) - torch.exp(-2 * ts)) ** 2).mean()
            else:
                loss = ((layer(torch.randn(8, 3)).detach() - 1) ** 2).mean() + rate.exp()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS413"]


def test_a_leaf_the_loss_reads_only_a_copy_of_is_named_so():
    found = _never_updated("rebuilt")
    assert len(found) == 1
    assert "a copy made from its values" in found[0].advice
    assert "inspect --script" not in found[0].advice


def test_a_module_weight_behind_a_cut_keeps_the_inspect_advice():
    found = _never_updated("cut")
    assert found and all("inspect --script" in f.advice for f in found)
