"""Ranking and ordinal losses fed a sigmoid's probabilities where they want logits.

RankNet as allRank writes it takes binary_cross_entropy_with_logits of the score
differences of the valid pairs only (`diff[valid]`, padded documents and ties masked
out): a sigmoid before that row subset went unnamed, since only views and casts were
followed down from the loss. CORAL's loss (coral_pytorch's coral_loss) is a logistic loss
written with F.logsigmoid, which squashed a sigmoid's output again unnamed: what it reads
as logits stays within (0, 1), so no threshold's probability can reach 0 or 1. GS431
names both now; the raw scores, and a BCE on probabilities, are right."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradscope

SLATE, GRADES, PAD = 6, 4, -1.0


def _ranknet(scores: torch.Tensor, labels: torch.Tensor, how: str) -> torch.Tensor:
    """allRank's rankNet: every ordered pair of real documents with different labels."""
    i, j = torch.triu_indices(SLATE, SLATE, 1)
    diff = scores[:, i] - scores[:, j]
    valid = (labels[:, i] != PAD) & (labels[:, j] != PAD) & (labels[:, i] != labels[:, j])
    target = (labels[:, i] > labels[:, j]).float()
    if how == "sigmoid":
        diff = torch.sigmoid(diff)
    if how == "probabilities":
        return F.binary_cross_entropy(torch.sigmoid(diff)[valid], target[valid])
    return F.binary_cross_entropy_with_logits(diff[valid], target[valid])


def _coral(logits: torch.Tensor, grade: torch.Tensor, how: str) -> torch.Tensor:
    """coral_pytorch's coral_loss on CORAL's K-1 threshold logits."""
    levels = (torch.arange(GRADES - 1) < grade[:, None]).float()
    if how == "sigmoid":
        logits = torch.sigmoid(logits)
    term = F.logsigmoid(logits) * levels + (F.logsigmoid(logits) - logits) * (1 - levels)
    return -term.sum(1).mean()


def _train(loss: str, how: str) -> list[gradscope.Finding]:
    torch.manual_seed(0)
    out = SLATE if loss == "ranknet" else GRADES - 1
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, out))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    with gradscope.watch() as w:
        for _ in range(4):
            x = torch.randn(8, 5)
            labels = torch.randint(0, GRADES, (8, SLATE)).float()
            labels[:, 4:] = PAD  # two padded documents per slate
            if loss == "ranknet":
                value = _ranknet(model(x), labels, how)
            else:
                value = _coral(model(x), labels[:, 0].long(), how)
            opt.zero_grad()
            value.backward()
            opt.step()
    return [f for f in w.report.findings if f.rule == "GS431"]


def test_a_sigmoid_before_ranknets_valid_pairs_is_named():
    (found,) = _train("ranknet", "sigmoid")
    assert "binary_cross_entropy_with_logits' own sigmoid" in found.message
    assert "drop the sigmoid" in found.advice


def test_a_sigmoid_under_corals_log_sigmoid_is_named():
    (found,) = _train("coral", "sigmoid")
    assert "log-sigmoid" in found.message and "coral_loss" in found.message
    assert "drop the sigmoid" in found.advice


@pytest.mark.parametrize(
    ("loss", "how"), [("ranknet", "logits"), ("ranknet", "probabilities"), ("coral", "logits")]
)
def test_raw_scores_and_probabilities_under_bce_are_right(loss, how):
    assert _train(loss, how) == []
