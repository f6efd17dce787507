"""A tensor an optimizer steps that no nn.Module holds (an orthogonal layer's skew generator,
a kernel's hyper-parameter bound at the script's top) is named by the script's own name for
it, and when it never gets a gradient (read only inside torch.no_grad(): the matrix
exponential rebuilt from it there each step) the advice says where to look: `inspect
--script` follows models' parameters, so pointing there finds nothing. The same tensor read
with the graph learns and is said nothing; a layer's parameter keeps the inspect pointer."""

from __future__ import annotations

import sys

import pytest
import torch
from torch import nn

import gradscope as gs


def _train(cut: bool, bound: bool, monkeypatch, unused_head: bool = False):
    torch.manual_seed(0)
    generator = nn.Parameter(torch.randn(4, 4) * 0.1)
    if bound:  # as a script binds it at its top
        monkeypatch.setattr(sys.modules["__main__"], "generator", generator, raising=False)
    layer, aux = nn.Linear(4, 1), nn.Linear(4, 1)
    opt = torch.optim.Adam([generator, *layer.parameters(), *aux.parameters()], lr=0.01)
    with gs.watch() as w:
        for _ in range(8):
            with torch.no_grad() if cut else torch.enable_grad():
                rotation = torch.linalg.matrix_exp(generator - generator.T)
            x = torch.randn(16, 4)
            out = layer(x @ rotation)
            loss = out.pow(2).mean() if unused_head else (out + aux(x)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return w.report


def _never(report):
    return {f.subject: f for f in report.findings if f.rule == "GS413"}


@pytest.mark.parametrize("bound", [True, False])
def test_a_tensor_no_module_holds_read_under_no_grad_points_at_its_reads(monkeypatch, bound):
    found = _never(_train(cut=True, bound=bound, monkeypatch=monkeypatch))
    name = "generator" if bound else "optimizer0.group0.param0"
    assert list(found) == [name], found
    assert "held by no nn.Module" in found[name].advice
    assert "torch.no_grad()" in found[name].advice
    assert "shows where the graph is cut" not in found[name].advice


def test_the_same_tensor_read_with_the_graph_is_said_nothing(monkeypatch):
    assert _never(_train(cut=False, bound=True, monkeypatch=monkeypatch)) == {}


def test_a_layer_that_never_learns_keeps_the_inspect_pointer(monkeypatch):
    found = _never(_train(cut=False, bound=True, monkeypatch=monkeypatch, unused_head=True))
    assert set(found) == {"Linear2.weight", "Linear2.bias"}, found
    assert all("shows where the graph is cut" in f.advice for f in found.values())
