"""Weights made by another network (a hypernetwork's, HyperNetworks by Ha et al.): the
target's kernels are tensors the hypernetwork computes, not parameters. Computed once
before the loop and reused, the second step's backward dies on the first step's freed
graph, and GS459 told the user to .detach() the carried tensor, which would leave the
hypernetwork no gradient at all: the tensor is made from weights that reach the loss only
through it, and must be made again in each step. A tensor carried with its graph whose
weights the step also reaches directly (a power iteration's vector kept with its graph)
keeps the detach advice; the same loop making its weights in each step is silent."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import gradscope
from gradscope.findings import Severity


def _hypernet_run(how: str):
    """A two-layer target whose kernels a hypernetwork emits from layer embeddings, and a
    bias of its own; `how`: "each-step", "made-once" (before the loop), or "power-carried"
    (the kernel normalised by a spectral estimate whose vector keeps its graph)."""
    torch.manual_seed(0)
    hyper = torch.nn.Sequential(torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 24))
    emb = torch.nn.Parameter(torch.randn(2, 3))
    bias = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.Adam([*hyper.parameters(), emb, bias], lr=1e-2)
    x, y = torch.randn(32, 6), torch.randn(32, 4)
    with gradscope.watch() as w:
        u = torch.ones(4) / 2
        kernels = hyper(emb).view(2, 4, 6)
        for _ in range(4):
            if how != "made-once":
                kernels = hyper(emb).view(2, 4, 6)
            w1 = kernels[0]
            if how == "power-carried":  # u = normalize(W v) kept with its graph
                u = F.normalize(w1 @ F.normalize(w1.t() @ u, dim=0), dim=0)
                w1 = w1 / (u @ w1 @ F.normalize(w1.t() @ u, dim=0))
            loss = F.mse_loss(F.linear(x, w1, bias) + x @ kernels[1].t(), y)
            opt.zero_grad()
            try:
                loss.backward()
            except RuntimeError:
                break
            opt.step()
    return w.report


def test_weights_made_once_before_the_loop_are_to_be_made_in_each_step():
    (f,) = [f for f in _hypernet_run("made-once").findings if f.rule == "GS459"]
    assert f.severity == Severity.ERROR and f.steps == (2,)
    assert "made from weights the optimizer steps" in f.message
    weights = next(e for e in f.evidence if e.startswith("weights reached only through it"))
    assert "0.weight" in weights and "(+1 more)" in weights  # the hypernetwork's 5, not the bias
    assert f.advice.startswith("compute that tensor again inside each step")
    assert "h.detach()" not in f.advice


def test_a_carried_tensor_whose_weights_the_step_also_reaches_keeps_the_detach_advice():
    (f,) = [f for f in _hypernet_run("power-carried").findings if f.rule == "GS459"]
    assert "h.detach()" in f.advice and "made from weights" not in f.message


def test_weights_made_in_each_step_are_silent():
    findings = _hypernet_run("each-step").findings
    assert not [f for f in findings if f.severity != Severity.INFO]


class _Embedded(torch.nn.Module):
    """Ha et al.'s static hypernetwork: each target layer's kernel is made from a layer
    embedding; `keep` says how the embeddings are kept: "list", "dict" (plain Python
    containers of tensors made to require grad) or "parameters" (an nn.ParameterList)."""

    def __init__(self, keep: str) -> None:
        super().__init__()
        made = [torch.randn(3, requires_grad=True) for _ in range(2)]
        if keep == "parameters":
            self.z = torch.nn.ParameterList(torch.nn.Parameter(t.detach()) for t in made)
        else:
            self.z = made if keep == "list" else dict(zip(("a", "b"), made, strict=True))
        self.hyper = torch.nn.Linear(3, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        zs = list(self.z.values()) if isinstance(self.z, dict) else list(self.z)
        for z in zs:
            x = torch.tanh(F.linear(x, self.hyper(z).view(4, 4)))
        return x


def _embedded_run(keep: str):
    torch.manual_seed(0)
    x, y = torch.randn(16, 4), torch.randn(16, 4)
    with gradscope.watch() as w:
        model = _Embedded(keep)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(4):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_layer_embeddings_in_a_plain_list_or_dict_are_named_with_their_container():
    listed = _embedded_run("list")
    assert {f.subject for f in listed} == {"z[0]", "z[1]"}
    assert all("plain list attribute (z)" in f.message for f in listed)
    assert all("self.z = nn.ParameterList(" in f.advice for f in listed)
    keyed = _embedded_run("dict")
    assert {f.subject for f in keyed} == {"z['a']", "z['b']"}
    assert all("nn.ParameterDict" in f.advice for f in keyed)


def test_layer_embeddings_in_a_parameter_list_are_silent():
    assert _embedded_run("parameters") == []
