"""Steps that apply the previous step's gradient again (GS472): no backward since the last
step and `.grad` still the very tensors it applied. A zeroth-order estimate written into
`.grad` only while it is None, or a backward run once before the loop, is named; an
estimate written at every step (a new tensor, or copied into `.grad` in place) and a
backtracking line search that retries one gradient at a halved lr are not."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from tests.watcher.zeroth_order import X, Y, estimate, loss_of


def _rules(how: str, steps: int = 12) -> set[str]:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with gradscope.watch() as w:
        if how == "backward once":
            F.mse_loss(model(X), Y).backward()
        for _ in range(steps):
            if how != "backward once":
                for p, g in zip(model.parameters(), estimate(model), strict=True):
                    if how == "new tensor" or (how == "written once" and p.grad is None):
                        p.grad = g
                    elif how == "copied in place":
                        p.grad = torch.zeros_like(p) if p.grad is None else p.grad
                        p.grad.copy_(g)
            opt.step()
    return {f.rule for f in w.report.findings}


def test_an_estimate_written_only_once_is_applied_again_at_every_step():
    assert "GS472" in _rules("written once")


def test_a_backward_run_once_before_the_loop_is_applied_again():
    assert "GS472" in _rules("backward once")


def test_an_estimate_written_at_every_step_is_not_this():
    assert "GS472" not in _rules("new tensor")
    assert "GS472" not in _rules("copied in place")


def test_a_line_search_retrying_one_gradient_at_halved_rates_is_not_this():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    with gradscope.watch() as w:
        for _ in range(6):
            opt.zero_grad()
            loss = F.mse_loss(model(X), Y)
            loss.backward()
            saved = [p.detach().clone() for p in model.parameters()]
            lr = 8.0
            for _ in range(4):
                opt.param_groups[0]["lr"] = lr
                opt.step()
                if loss_of(model) < loss:
                    break
                with torch.no_grad():
                    for p, s in zip(model.parameters(), saved, strict=True):
                        p.copy_(s)
                lr /= 2
    assert "GS472" not in {f.rule for f in w.report.findings}
