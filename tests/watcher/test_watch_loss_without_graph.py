"""A differentiable rollout whose controller's action reaches the simulator as Python
numbers (`torch.tensor(action.tolist())`): the loss has no graph, and the backward raises
autograd's "element 0 of tensors does not require grad". watch said only that the script
raised; GS468 names the cut with grad mode on, and the inspect command that shows its line.
Grad mode left off is GS461's, not this; the rollout kept in tensors is silent."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

import gradscope


def _rollout(how: str):
    torch.manual_seed(0)
    controller = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = torch.optim.Adam(controller.parameters(), lr=1e-2)
    crash = pytest.raises(RuntimeError, match="does not require grad")
    with crash if how != "tensors" else contextlib.nullcontext(), gradscope.watch() as w:
        for step in range(1, 6):
            x, v = torch.zeros(2), torch.zeros(2)
            for _ in range(20):
                action = controller(torch.cat([x, v]))
                if how == "numbers":
                    action = torch.tensor(action.tolist())
                v = v + 0.05 * (action - 0.1 * v)
                x = x + 0.05 * v
            loss = ((x - torch.tensor([1.0, -0.5])) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if how == "grad left off" and step == 3:
                torch.set_grad_enabled(False)
    torch.set_grad_enabled(True)
    return {f.rule: f for f in w.report.findings}


def test_an_action_taken_out_of_the_graph_is_named():
    found = _rollout("numbers")["GS468"]
    assert found.steps == (1,) and "grad mode was on" in found.message
    assert ".tolist()" in found.message and "gradscope inspect --script" in found.advice


def test_grad_mode_left_off_is_not_this():
    found = _rollout("grad left off")
    assert "GS461" in found and "GS468" not in found


def test_a_rollout_kept_in_tensors_is_silent():
    assert not {"GS461", "GS468"} & set(_rollout("tensors"))


def test_a_loss_of_argsort_ranks_is_named_with_its_surrogate():
    """NDCG of hard ranks (argsort of argsort): the ranks carry no derivative."""
    torch.manual_seed(0)
    scorer = nn.Linear(5, 1)
    gains = 2.0 ** torch.randint(0, 4, (8, 6)) - 1
    with pytest.raises(RuntimeError, match="does not require grad"), gradscope.watch() as w:
        scores = scorer(torch.randn(8, 6, 5)).squeeze(-1)
        ranks = scores.argsort(-1, descending=True).argsort(-1) + 1
        loss = -(gains / torch.log2(1.0 + ranks)).sum(-1).mean()
        loss.backward()
    (found,) = [f for f in w.report.findings if f.rule == "GS468"]
    assert "argsort" in found.message and "smooth surrogate" in found.advice
