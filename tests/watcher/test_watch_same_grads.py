"""Gradients written over with the values the previous step applied (GS473): a flat buffer
made once and copied back into `.grad` after every backward (a stale all-reduce buffer)
makes each step apply the first step's gradient; it was named a learning rate too high
(GS419). A buffer flattened afresh each step, a loss linear in the weights (whose backward
gives the same gradient by right), sign-compressed gradients (whose norm is the same at
every step) and gradients that are all zero, clipped in place, are not this."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

import gradscope

STEPS = 26
"""Steps 1-3 and the pair 25-26 are compared: 4 intervals."""


def _rules(how: str) -> set[str]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=1e-2)
    xs, ys = torch.randn(STEPS, 16, 6), torch.randint(0, 3, (STEPS, 16))
    buffer = None
    with gradscope.watch() as w:
        for x, y in zip(xs, ys, strict=True):
            opt.zero_grad()
            if how == "zero":
                (model(x) * 0).sum().backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
            elif how == "linear":
                sum((p * 0.1).sum() for p in params).backward()
            else:
                F.cross_entropy(model(x), y).backward()
            grads = [p.grad for p in params]
            if how in ("stale buffer", "fresh buffer"):
                flat = _flatten_dense_tensors(grads)
                buffer = flat if buffer is None or how == "fresh buffer" else buffer
                for g, synced in zip(grads, _unflatten_dense_tensors(buffer, grads), strict=True):
                    g.copy_(synced)
            elif how == "sign":
                for p in params:
                    p.grad = p.grad.sign()
            opt.step()
    return {f.rule for f in w.report.findings}


def test_gradients_copied_back_from_a_buffer_made_once_are_named():
    assert "GS473" in _rules("stale buffer")


def test_a_fresh_buffer_a_linear_loss_sign_compression_and_zero_gradients_are_not_this():
    for how in ("fresh buffer", "linear", "sign", "zero"):
        assert "GS473" not in _rules(how), how
