"""A parameter assigned in place of one an optimizer holds, after that optimizer was built:
a language model's tied output embedding re-assigned as a copy (`head.weight =
nn.Parameter(emb.weight.clone())`), or a layer shared across depth (ALBERT) replaced by a
deep copy (`layers[2] = copy.deepcopy(layers[0])`), is in no optimizer, and GS411 took the
head for a target or EMA copy ("compute its forward under torch.no_grad()"), advice that
would cut the gradient to the whole model below it. It is named as the assignment it is; a
copy kept by the algorithm (a target network whose forward was left attached) keeps the
copy advice, and the ties kept are silent."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Severity


class _TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 8)
        self.body = nn.Linear(8, 8)
        self.head = nn.Linear(8, 12, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(self.emb(ids))))


def _lm_run(how: str):
    torch.manual_seed(0)
    ids = torch.randint(0, 12, (4, 6))
    with gradscope.watch() as w:  # the whole script watched, as `gradscope watch` does
        model = _TiedLM()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        if how == "untied-after":
            model.head.weight = nn.Parameter(model.emb.weight.detach().clone())
        for _ in range(4):
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, 12), ids[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS411"]


def _target_run():
    """A DQN-style target copy made by deepcopy, its forward left attached."""
    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    target = copy.deepcopy(q)
    opt = torch.optim.Adam(q.parameters(), lr=1e-2)
    s, s2, r = torch.randn(16, 4), torch.randn(16, 4), torch.randn(16)
    with gradscope.watch() as w:
        for _ in range(4):
            y = r + 0.9 * target(s2).max(1).values
            loss = F.mse_loss(q(s).max(1).values, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_a_tie_undone_after_the_optimizer_is_named_as_the_assignment():
    (f,) = _lm_run("untied-after")
    assert f.subject == "head.weight" and f.severity == Severity.ERROR
    assert "took the place of emb.weight, which an optimizer holds" in f.message
    assert "head.weight = emb.weight" in f.advice and "no_grad" not in f.advice


def test_a_tie_made_before_the_optimizer_is_silent():
    assert _lm_run("tied") == []


def test_a_target_copy_left_attached_keeps_the_copy_advice():
    found = _target_run()
    assert found and all("looks like a copy of" in f.advice for f in found)
    assert not any("took the place of" in f.message for f in found)


def _shared_depth_run(how: str):
    """One layer applied at every depth (ALBERT's cross-layer sharing)."""
    torch.manual_seed(0)
    x, y = torch.randn(16, 6), torch.randn(16, 6)
    with gradscope.watch() as w:
        layer = nn.Linear(6, 6)
        layers = nn.ModuleList([layer] * 3)
        opt = torch.optim.SGD(layers.parameters(), lr=0.05)
        if how == "copied-after":
            layers[2] = copy.deepcopy(layers[0])
        for _ in range(4):
            h = x
            for block in layers:
                h = torch.tanh(block(h))
            loss = F.mse_loss(h, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS411"]


def test_a_shared_layer_replaced_by_a_copy_after_the_optimizer_is_named_as_the_assignment():
    found = _shared_depth_run("copied-after")
    assert {f.subject for f in found} == {"2.weight", "2.bias"}
    assert all("took the place of 0." in f.message for f in found)
    assert all("layers[2] = layers[0]" in f.advice for f in found)


def test_a_layer_shared_across_depth_is_silent():
    assert _shared_depth_run("shared") == []
