"""A learning rate that is itself learned (hypergradient descent through a differentiable
optimizer: `SGD(fast, lr=log_lr.exp(), differentiable=True)`) is a tensor that requires
grad. Reading it for the report with float() made torch print "Converting a tensor with
requires_grad=True to a scalar" on the user's stderr, from gradscope's own line; the
report must read it as the number it is, without a word on the user's streams."""

from __future__ import annotations

import math
import warnings

import torch
from torch.func import functional_call

import gradscope


def _hypergradient_run(steps: int = 6):
    """The inner step is differentiable SGD at a learned lr; the outer loss, after the
    step, trains both the initial weights and log(lr)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    names = [n for n, _ in model.named_parameters()]
    log_lr = torch.tensor(math.log(0.05), requires_grad=True)
    outer = torch.optim.Adam([*model.parameters(), log_lr], lr=1e-2)
    x, y = torch.randn(steps * 16, 4), torch.randn(steps * 16, 1)
    with gradscope.watch() as w:
        for i in range(steps):
            a, b = slice(i * 16, i * 16 + 8), slice(i * 16 + 8, i * 16 + 16)
            fast = [p.clone() for p in model.parameters()]
            inner_loss = torch.nn.functional.mse_loss(
                functional_call(model, dict(zip(names, fast, strict=True)), (x[a],)), y[a]
            )
            grads = torch.autograd.grad(inner_loss, fast, create_graph=True)
            fast = [p.clone() for p in fast]  # the step updates these in place
            for p, g in zip(fast, grads, strict=True):
                p.grad = g
            torch.optim.SGD(fast, lr=log_lr.exp(), differentiable=True).step()
            outer_loss = torch.nn.functional.mse_loss(
                functional_call(model, dict(zip(names, fast, strict=True)), (x[b],)), y[b]
            )
            outer.zero_grad()
            outer_loss.backward()
            outer.step()
    return w.report


def test_a_learned_lr_is_read_without_a_warning_on_the_users_stream():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = _hypergradient_run()
    said = [str(c.message) for c in caught if "requires_grad=True to a scalar" in str(c.message)]
    assert said == []
    assert report.run.steps  # the run was watched
    lrs = {p.lr for p in report.run.params if p.lr is not None}
    assert lrs and all(math.isfinite(lr) and lr > 0 for lr in lrs), lrs
