"""inspect names a loss fed probabilities where it wants logits (GS432) from its one pass,
with the line of the softmax or sigmoid that fed it; the look-alikes are said nothing."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gradscope.api.inspecting import inspect

torch.manual_seed(0)
X = torch.randn(16, 12)
Y = torch.randint(0, 10, (16,))
TAGS = (torch.rand(16, 10) > 0.5).float()


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 10))


@pytest.mark.parametrize(
    ("loss", "words"),
    [
        (lambda out: F.cross_entropy(F.softmax(out, dim=1), Y), "never fall below 1.46"),
        (lambda out: F.cross_entropy(F.softmax(out, dim=0), Y), "softmax over dim 0"),
        (lambda out: F.nll_loss(F.log_softmax(out, dim=0), Y), "log_softmax over dim 0"),
        (
            lambda out: F.binary_cross_entropy_with_logits(torch.sigmoid(out), TAGS),
            "never fall below 0.313",
        ),
    ],
)
def test_inspect_names_the_op_that_fed_probabilities_to_the_loss(loss, words):
    report = inspect(_model(), X, loss)
    found = [f for f in report.findings if f.rule == "GS432"]
    assert len(found) == 1 and words in found[0].message, report.findings
    assert found[0].slug == "loss-fed-probs"
    assert any("test_logits.py:" in e for e in found[0].evidence), found[0].evidence


@pytest.mark.parametrize(
    "loss",
    [
        lambda out: F.cross_entropy(out, Y),
        lambda out: F.cross_entropy(F.log_softmax(out, dim=1), Y),
        lambda out: F.nll_loss(F.log_softmax(out, dim=-1), Y),
        lambda out: F.binary_cross_entropy(torch.sigmoid(out), TAGS),
        lambda out: F.binary_cross_entropy_with_logits(out, TAGS),
    ],
)
def test_inspect_says_nothing_of_logits_or_log_probabilities(loss):
    report = inspect(_model(), X, loss)
    assert [f.rule for f in report.findings if f.rule == "GS432"] == []
