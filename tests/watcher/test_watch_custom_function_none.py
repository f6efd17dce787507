"""GS413 for a tensor whose gradient is None because the user's own custom
autograd.Function returns None for it: feedback alignment's fixed random matrix left
trainable, or a weight whose gradient the backward forgets. It was told to check that it
takes part in the loss, which it does; the finding names the Function instead. The fixed
matrix frozen, as feedback-alignment code declares it, is silent."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import gradscope


class LinearFA(torch.autograd.Function):
    """A linear layer whose backward sends the error through a fixed matrix `feedback`
    instead of the weight's transpose; `forget_weight` drops the weight's gradient."""

    @staticmethod
    def forward(ctx, x, weight, feedback, forget_weight):
        ctx.save_for_backward(x, feedback)
        ctx.forget_weight = forget_weight
        return x @ weight.t()

    @staticmethod
    def backward(ctx, grad_out):
        x, feedback = ctx.saved_tensors
        grad_weight = None if ctx.forget_weight else grad_out.t() @ x
        return grad_out @ feedback, grad_weight, None, None


def _fa(how: str):
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(8, 6) * 0.3)
    feedback = torch.nn.Parameter(torch.randn(8, 6) * 0.3, requires_grad=how == "trainable")
    head = torch.nn.Linear(8, 3)
    opt = torch.optim.SGD([weight, feedback, *head.parameters()], lr=0.05)
    with gradscope.watch() as w:
        for _ in range(6):
            x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
            h = torch.tanh(LinearFA.apply(x, weight, feedback, how == "forgotten"))
            loss = F.cross_entropy(head(h), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.subject: f for f in w.report.findings if f.rule == "GS413"}


@pytest.mark.parametrize(("how", "subject"), [("trainable", "param1"), ("forgotten", "param0")])
def test_a_none_from_the_users_own_function_names_it(how, subject):
    (f,) = _fa(how).values()
    assert f.subject.endswith(subject)  # the feedback matrix, or the weight
    assert "custom autograd.Function LinearFA" in f.message and "returns None" in f.message
    assert "requires_grad_(False)" in f.advice and "LinearFA.backward" in f.advice
    assert "takes part in the loss" not in f.advice


def test_the_fixed_matrix_frozen_is_silent():
    assert _fa("frozen") == {}
