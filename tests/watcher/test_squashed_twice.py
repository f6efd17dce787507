"""A segmentation net whose output already went through a softmax (or sigmoid), handed to
a Dice loss that applies its own: MONAI's DiceLoss(softmax=True) / DiceLoss(sigmoid=True)
(monai/losses/dice.py) runs torch.softmax(input, 1) or torch.sigmoid(input) on what it is
given. Squashed twice, no prediction can reach 0 or 1, the overlap never becomes perfect
and the gradients shrink; a soft Dice is no loss gradscope reads, so the run went unnamed.
GS431 now names it from the graph. Raw logits into the loss's own softmax, and a sigmoid
net whose hidden sigmoid feeds a layer before the last, are right."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope


def _dice(pred: torch.Tensor, target: torch.Tensor, squash: str) -> torch.Tensor:
    """DiceLoss's computation (monai/losses/dice.py): its own activation, then 1 - soft Dice."""
    pred = torch.softmax(pred, 1) if squash == "softmax" else torch.sigmoid(pred)
    dims = tuple(range(2, pred.ndim))
    inter = (pred * target).sum(dims)
    return (1 - (2 * inter + 1e-5) / (pred.sum(dims) + target.sum(dims) + 1e-5)).mean()


def _segment(squash: str, model_squashes: bool, hidden_sigmoid: bool = False) -> set[str]:
    torch.manual_seed(0)
    classes = 3 if squash == "softmax" else 1
    hidden = nn.Sigmoid() if hidden_sigmoid else nn.ReLU()
    layers = [nn.Conv2d(1, 8, 3, padding=1), hidden, nn.Conv2d(8, classes, 1)]
    if model_squashes:
        layers.append(nn.Softmax(dim=1) if squash == "softmax" else nn.Sigmoid())
    model = nn.Sequential(*layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(4, 1, 12, 12)
    labels = (x > 0).long() + (x > 1).long() if classes == 3 else (x > 0).long()
    target = nn.functional.one_hot(labels[:, 0], 3).permute(0, 3, 1, 2).float()
    target = target if classes == 3 else labels.float()
    with gradscope.watch() as w:
        for _ in range(4):
            loss = _dice(model(x), target, squash)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.rule for f in w.report.findings}


@pytest.mark.parametrize("squash", ["softmax", "sigmoid"])
def test_a_model_output_squashed_again_by_the_losss_own_activation_is_named(squash):
    assert "GS431" in _segment(squash, model_squashes=True)


@pytest.mark.parametrize("squash", ["softmax", "sigmoid"])
def test_raw_logits_into_the_losss_own_activation_are_right(squash):
    assert "GS431" not in _segment(squash, model_squashes=False, hidden_sigmoid=True)


def test_inspect_names_a_softmax_squashed_again_too():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.Softmax(dim=1))
    x = torch.randn(2, 1, 8, 8)
    target = torch.zeros(2, 3, 8, 8)
    target[:, 0] = 1
    report = gradscope.inspect(model, x, loss_fn=lambda out: _dice(out, target, "softmax"))
    assert "GS432" in {f.rule for f in report.findings}
