"""A Hessian-vector product (influence functions' LiSSA) whose first torch.autograd.grad
lacks create_graph=True: the second call fails on a gradient outside the graph, whether it
differentiates those gradients with grad_outputs or their product with a vector, summed.
Named (GS474), with create_graph=True as the fix; by `.backward()` of that product, the
loss without a graph (GS468) names that derivative among its cuts, and a loss merely
detached does not. The same loop with create_graph runs silent, and a
failing derivative of a value cut from the graph after an input's plain gradient (a
saliency map) is not this."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.findings import Severity


def _influence(how: str):
    """A few SGD steps, then LiSSA iterations on the trained weights."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 6), torch.randint(0, 3, (64,))
    params = list(model.parameters())
    crashes = pytest.raises(RuntimeError, match="does not require grad")
    with crashes if how != "healthy" else _nothing(), gradscope.watch() as w:
        for _ in range(10):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        v = [torch.randn_like(p) for p in params]
        for _ in range(3):
            loss = F.cross_entropy(model(x[:16]), y[:16])
            if how == "saliency":
                xs = x[:16].clone().requires_grad_()
                torch.autograd.grad(F.cross_entropy(model(xs), y[:16]), xs)
                torch.autograd.grad(loss.detach(), params)
            if how == "detached":  # a cut from the graph, no derivative before it
                (loss.detach() * 2).requires_grad_(False).backward()
            g = torch.autograd.grad(loss, params, create_graph=how == "healthy")
            if how == "backward":
                model.zero_grad()
                sum((a * b).sum() for a, b in zip(g, v, strict=True)).backward()
            if how == "product":
                hv = torch.autograd.grad(
                    sum((a * b).sum() for a, b in zip(g, v, strict=True)), params
                )
            else:
                hv = torch.autograd.grad(g, params, grad_outputs=v)
            v = [a - 0.1 * b for a, b in zip(v, hv, strict=True)]
    return w.report.findings


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("how", ["outputs", "product"])
def test_a_hessian_vector_product_without_create_graph_is_named(how):
    (found,) = [f for f in _influence(how) if f.rule == "GS474"]
    assert found.steps == (11,) and "without create_graph=True" in found.message
    assert "create_graph=True" in found.advice
    direct = how == "outputs"  # else a product: maybe not made from it, said so
    assert ("on the results of" in found.message) == direct
    assert ("if the failing value is not made from it" in found.advice) != direct


def test_the_product_by_backward_names_the_derivative_among_the_cuts():
    (found,) = [f for f in _influence("backward") if f.rule == "GS468"]
    assert "torch.autograd.grad without create_graph=True" in found.message
    assert "with create_graph=True" in found.advice
    (cut,) = [f for f in _influence("detached") if f.rule == "GS468"]
    assert "create_graph" not in cut.message + cut.advice


def test_the_product_taken_with_create_graph_is_silent():
    assert not [f for f in _influence("healthy") if f.severity > Severity.INFO]


def test_a_value_cut_from_the_graph_after_an_inputs_gradient_is_not_this():
    assert "GS474" not in {f.rule for f in _influence("saliency")}
