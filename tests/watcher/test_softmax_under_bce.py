"""A softmax before `binary_cross_entropy_with_logits` (a multi-label or mixup head trained
with BCE, as timm's BinaryCrossEntropy does, its logits softmaxed first): the loss
squashes the probabilities again with its own sigmoid, so it never falls below
ln(1 + 1/e) = 0.313 per target and its gradients shrink. Only a sigmoid there was named;
the softmax went unnamed (an information finding blamed noisy targets). Raw logits, and
probabilities handed to binary_cross_entropy (BCELoss), are right."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope


def _loss(out: torch.Tensor, target: torch.Tensor, how: str) -> torch.Tensor:
    if how == "softmax":
        return F.binary_cross_entropy_with_logits(F.softmax(out, 1), target)
    if how == "softmax-pos-weight":
        return nn.BCEWithLogitsLoss(pos_weight=torch.full((5,), 3.0))(out.softmax(-1), target)
    if how == "softmax-bce":
        return F.binary_cross_entropy(F.softmax(out, 1), target)
    if how == "sigmoid-bce":
        return F.binary_cross_entropy(torch.sigmoid(out), target)
    return F.binary_cross_entropy_with_logits(out, target)


def _train(how: str, steps: int = 4) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(steps):
            x = torch.randn(16, 6)
            target = F.one_hot(x[:, :5].argmax(1), 5).float() * 0.9 + 0.02
            loss = _loss(model(x), target, how)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS431"]


@pytest.mark.parametrize("how", ["softmax", "softmax-pos-weight"])
def test_a_softmax_under_bce_with_logits_is_named(how):
    (found,) = _train(how)
    assert "a softmax, then its own sigmoid" in found.message
    assert "drop the softmax" in found.advice
    assert ("0.313" in found.message) == (how == "softmax")  # a weighted loss has no floor


@pytest.mark.parametrize("how", ["logits", "softmax-bce", "sigmoid-bce"])
def test_logits_and_probabilities_under_bce_are_right(how):
    assert _train(how) == []


def test_inspect_names_it_too():
    target = torch.eye(5)[torch.arange(8) % 5]
    model = nn.Sequential(nn.Linear(6, 5), nn.Softmax(dim=1))
    loss_fn = nn.BCEWithLogitsLoss()
    report = gradscope.inspect(model, torch.randn(8, 6), lambda out: loss_fn(out, target))
    (found,) = [f for f in report.findings if f.rule == "GS432"]
    assert "drop the softmax" in found.advice
