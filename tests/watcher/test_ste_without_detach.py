"""A straight-through estimator written without its .detach(): soft + (hard - soft) adds the
soft sample and subtracts it again, so its derivative is 1 - 1 = 0 and the encoder below it
gets exact zeros. GS413 (watch) and GS106 (inspect --script) told it as terms that cancel in
general, or a dead ReLU; they now name the sum and the missing .detach(). The estimator with
the difference detached, in either order, is silent; a sum whose subtracted term is another
tensor, or scaled (alpha), is no such sum. Ternary weights (Li et al. 2016) quantised as
`w + (alpha(w) * sign(w) * mask - w)` keep a gradient through alpha, the mean of the kept
|w|: no zeros for GS413, and GS489 names the sum."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope
from gradscope.autograd_walk import CANCELLED, flat_op
from gradscope.findings import Severity
from gradscope.inspector import flat_off


def _code(soft: torch.Tensor, how: str) -> torch.Tensor:
    hard = F.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
    return {
        "detached": soft + (hard - soft).detach(),
        "detached-first": (hard - soft).detach() + soft,
        "hard-minus-detached": hard - soft.detach() + soft,
        "no-detach": soft + (hard - soft),
        "no-detach-first": (hard - soft) + soft,
    }[how]


def _models() -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5)), nn.Linear(5, 3)


def _watched(how: str) -> list[gradscope.Finding]:
    enc, dec = _models()
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(4):
            x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
            loss = F.cross_entropy(dec(_code(F.softmax(enc(x), -1), how)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("how", ["no-detach", "no-detach-first"])
def test_the_estimator_without_detach_is_named(how):
    found = _watched(how)
    assert {f.subject for f in found} == {"Sequential.0.weight", "Sequential.0.bias",
                                          "Sequential.2.weight", "Sequential.2.bias"}  # fmt: skip
    assert all(f.rule == "GS413" and "x + (y - x)" in f.message for f in found)
    assert "(hard - soft).detach()" in found[0].advice


@pytest.mark.parametrize("how", ["detached", "detached-first", "hard-minus-detached"])
def test_the_estimator_with_detach_is_silent(how):
    assert _watched(how) == []


def test_inspect_names_the_sum_too():
    enc, dec = _models()
    model = nn.Sequential(enc, dec)
    soft = F.softmax(enc(torch.randn(4, 8)), -1)
    loss = dec(_code(soft, "no-detach")).sum()
    assert dict(flat_off.names(model, loss)) == {
        n: CANCELLED for n in ("0.0.weight", "0.0.bias", "0.2.weight", "0.2.bias")
    }
    assert flat_off.names(model, dec(_code(soft, "detached")).sum()) == ()


def test_a_sum_of_other_tensors_or_a_scaled_difference_is_no_such_sum():
    a, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    for y in (a + (b - a), (b - a) + a):
        assert flat_op(y.grad_fn) == CANCELLED
    for y in (a + (b - b * 1), a + (b - a).detach(), a + torch.sub(b, a, alpha=2), a + b):
        assert flat_op(y.grad_fn) is None


def _ternary(w: torch.Tensor, detach: bool) -> torch.Tensor:
    mask = (w.abs() > 0.7 * w.abs().mean()).float()
    q = (w.abs() * mask).sum() / mask.sum().clamp(min=1) * torch.sign(w) * mask
    return w + ((q - w).detach() if detach else (q - w))


def _ternary_found(detach: bool) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 3))
    first, last = model
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(4):
            x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
            hidden = F.relu(F.linear(x, _ternary(first.weight, detach), first.bias))
            loss = F.cross_entropy(last(hidden), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.severity >= Severity.WARNING]


def test_ternary_weights_without_detach_are_named_though_they_get_a_gradient():
    (f,) = _ternary_found(detach=False)
    assert f.rule == "GS489" and f.subject == "0.weight"
    assert "x + (q(x) - x)" in f.message and ".detach()" in f.advice


def test_ternary_weights_with_detach_are_silent():
    assert _ternary_found(detach=True) == []


def test_an_estimator_whose_tensor_gets_only_zeros_is_gs413s_alone():
    assert {f.rule for f in _watched("no-detach")} == {"GS413"}
