"""Findings about gradients in a run with no backward at all (evolution strategies, SPSA,
a gradient computed outside autograd): `.grad` holds only what the script writes, so the
advice speaks of those writes, not of the graph. A tensor left out of the optimizer
(GS411) is told to join it, with no "each backward adds" evidence; a gradient always 0
(GS413) is traced to the script's writes, not to terms that cancel. The same bugs in a
backprop run keep the graph's advice (a loss multiplied by 0 is named as that product)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.autograd_walk import TIMES_ZERO
from tests.watcher.zeroth_order import X, Y, estimate


def _findings(backward: bool, bug: str) -> dict[str, list]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    params = list(model.parameters())
    held = params[2:] if bug == "left out" else params
    opt = torch.optim.SGD(held, lr=0.02)
    buffers = [torch.zeros_like(p) for p in params]
    with gradscope.watch() as w:
        for _ in range(12):
            opt.zero_grad(set_to_none=bug != "rebound")
            if backward:
                loss = F.mse_loss(model(X), Y)
                (loss * 0 if bug == "rebound" else loss).backward()
            elif bug == "rebound":
                for p, b in zip(params, buffers, strict=True):
                    p.grad = b if p.grad is None else p.grad
                buffers = estimate(model)  # rebound: .grad keeps the zeros
            else:
                for p, g in zip(params, estimate(model), strict=True):
                    p.grad = g
            opt.step()
    found: dict[str, list] = {}
    for f in w.report.findings:
        found.setdefault(f.rule, []).append(f)
    return found


def test_a_tensor_left_out_of_a_backward_free_run_is_told_to_join_the_optimizer():
    for f in _findings(backward=False, bug="left out")["GS411"]:
        assert "no backward ran" in f.advice and "EMA" not in f.advice
        assert not any("each backward adds" in e for e in f.evidence)


def test_a_tensor_left_out_of_a_backprop_run_keeps_the_graph_advice():
    for f in _findings(backward=True, bug="left out")["GS411"]:
        assert "no backward ran" not in f.advice


def test_zeros_written_by_a_backward_free_run_are_traced_to_its_writes():
    for f in _findings(backward=False, bug="rebound")["GS413"]:
        assert "no backward ran" in f.advice and "cancel" not in f.advice


def test_zeros_from_a_backward_are_told_of_the_loss_multiplied_by_0():
    for f in _findings(backward=True, bug="rebound")["GS413"]:
        assert TIMES_ZERO in f.message and "the factor that is 0" in f.advice
