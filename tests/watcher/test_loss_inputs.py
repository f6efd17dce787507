"""What a loss that wants logits was fed, read off its graph (watcher/loss_inputs.py): a
double softmax or sigmoid and its floor, a (log_)softmax over the wrong axis followed
through views and transposes; and the look-alikes that are right, said nothing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gradscope.watcher import loss_graph, loss_inputs

torch.manual_seed(0)
X = torch.randn(8, 10, requires_grad=True)
Y = torch.randint(0, 10, (8,))
L = torch.randn(2, 5, 7, requires_grad=True)  # (batch, sequence, vocabulary)
LY = torch.randint(0, 7, (2, 5))
T = torch.rand(8, 10)


@pytest.mark.parametrize(
    ("loss", "misfed", "bound"),
    [
        (lambda: F.cross_entropy(F.softmax(X, 1), Y), "softmax", math.log1p(9 / math.e)),
        (lambda: F.cross_entropy(F.softmax(X, -1), Y) * 0.5, "softmax", 0.5 * 1.4611501717),
        (lambda: F.cross_entropy(F.softmax(X, 0), Y), "softmax-wrong-dim", 0.0),
        (lambda: F.nll_loss(F.log_softmax(X, 0), Y), "log-softmax-wrong-dim", 0.0),
        (
            lambda: F.cross_entropy(F.softmax(L, -1).view(-1, 7), LY.view(-1)),
            "softmax",
            math.log1p(6 / math.e),
        ),
        (
            lambda: F.cross_entropy(F.softmax(L, -1).transpose(1, 2), LY),
            "softmax",
            math.log1p(6 / math.e),
        ),
        (
            lambda: F.cross_entropy(F.softmax(L, 1).reshape(-1, 7), LY.view(-1)),
            "softmax-wrong-dim",
            0.0,
        ),
        (
            lambda: F.nll_loss(F.log_softmax(L, 1).view(-1, 7), LY.view(-1)),
            "log-softmax-wrong-dim",
            0.0,
        ),
        (lambda: F.binary_cross_entropy_with_logits(torch.sigmoid(X), T), "sigmoid", 0.3132616875),
        (
            lambda: F.binary_cross_entropy_with_logits(torch.sigmoid(X), T, pos_weight=T[0]),
            "sigmoid",
            0.0,  # a weighted loss's floor depends on the weights: not claimed
        ),
        (lambda: F.cross_entropy(F.softmax(X, 1), Y, reduction="sum"), "softmax", 0.0),
    ],
)
def test_probabilities_fed_to_a_loss_that_wants_logits_are_named(loss, misfed, bound):
    kind = loss_graph.read(loss())
    assert [t.misfed for t in kind.terms] == [misfed]
    assert kind.lower_bound() == pytest.approx(bound)
    assert kind.where is not None and "test_loss_inputs.py" in kind.where
    assert [m.what for m in loss_inputs.find(loss().grad_fn)] == [misfed]


def test_the_floors_are_the_true_minima():
    """A double softmax over C classes reaches ln(1 + (C-1)/e) at a one-hot softmax output;
    a double sigmoid ln(1 + 1/e) at an output of 1 with a target of 1."""
    for classes in (10, 20):
        p = torch.eye(classes)[:1] * 1.0
        floor = F.cross_entropy(p.log_softmax(1), torch.zeros(1, dtype=torch.long))
        assert loss_inputs.softmax_floor(classes) == pytest.approx(float(floor))
    assert loss_inputs.softmax_floor(10) == pytest.approx(1.4612, abs=1e-4)
    assert loss_inputs.softmax_floor(20) == pytest.approx(2.0782, abs=1e-4)
    best = F.binary_cross_entropy_with_logits(torch.ones(1), torch.ones(1))
    assert loss_inputs.SIGMOID_FLOOR == pytest.approx(float(best))


def _attention_logits() -> torch.Tensor:
    q = torch.randn(2, 5, 7, requires_grad=True)
    return F.softmax(q @ q.transpose(1, 2), -1) @ q  # a softmax that feeds an attention


@pytest.mark.parametrize(
    "loss",
    [
        lambda: F.cross_entropy(X, Y),
        lambda: F.cross_entropy(F.log_softmax(X, 1), Y),  # the same loss and gradients
        lambda: F.nll_loss(F.log_softmax(X, -1), Y),
        lambda: F.nll_loss(torch.log(F.softmax(X, 1)), Y),  # log of a softmax: log-probabilities
        lambda: F.binary_cross_entropy(torch.sigmoid(X), T),  # BCELoss wants probabilities
        lambda: F.binary_cross_entropy_with_logits(X, T),
        lambda: F.cross_entropy(L.transpose(1, 2), LY),
        lambda: F.nll_loss(F.log_softmax(L, -1).view(-1, 7), LY.view(-1)),
        lambda: F.cross_entropy(_attention_logits().view(-1, 7), LY.view(-1)),
        lambda: F.cross_entropy(X, F.softmax(torch.randn(8, 10), 1)),  # soft targets
    ],
)
def test_logits_and_log_probabilities_over_the_classes_are_said_nothing(loss):
    kind = loss_graph.read(loss())
    assert kind.misfed() == [] and kind.where is None
    assert loss_inputs.find(loss().grad_fn) == []
