"""cross_entropy against probability targets (Mixup, CutMix, a teacher's softened
probabilities) is a loss of its own kind: -Σ targets · log_softmax, bounded below by 0 but
not at ln C for a uniform guess (its floor is the targets' entropy). Recognised, it is
judged like any loss, and a softmax under its log_softmax is a double softmax (GS431) as
under a class-index cross_entropy; probability targets themselves are no fault."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gradscope.findings import Severity
from gradscope.watcher import loss_graph, loss_inputs
from tests.watcher.watch_scripts import watched_domain

torch.manual_seed(0)
X = torch.randn(6, 5, requires_grad=True)
P = torch.softmax(torch.randn(6, 5), -1)


def _kd(out: torch.Tensor) -> torch.Tensor:
    return -(P * F.log_softmax(out / 4, -1)).sum(-1).mean() * 16


@pytest.mark.parametrize(
    ("loss", "reduction", "factor"),
    [
        (lambda: F.cross_entropy(X, P), "mean", 1.0),
        (lambda: F.cross_entropy(X, P, reduction="sum"), "sum", 1.0),
        (lambda: F.cross_entropy(X, P, label_smoothing=0.1), "mean", 1.0),
        (lambda: _kd(X), "mean", 16.0),
        (lambda: 0.5 * F.cross_entropy(X, P), "mean", 0.5),
        (lambda: (P * F.log_softmax(X, -1)).sum(-1).mean(), "mean", -1.0),  # maximised
    ],
)
def test_probability_targets_are_a_cross_entropy_of_their_own(loss, reduction, factor):
    kind = loss_graph.read(loss())
    (term,) = kind.terms
    assert (term.kind, term.reduction, term.factor, term.classes) == (
        "soft_cross_entropy",
        reduction,
        factor,
        5,
    )
    assert kind.known and term.misfed is None and kind.uniform() is None
    assert kind.lower_bound() == (0.0 if factor > 0 else None)


@pytest.mark.parametrize(
    ("loss", "misfed"),
    [
        (lambda: F.cross_entropy(F.softmax(X, 1), P), "softmax"),
        (lambda: F.cross_entropy(F.softmax(X, -1), P, label_smoothing=0.1), "softmax"),
        (lambda: F.cross_entropy(F.softmax(X, 0), P), "softmax-wrong-dim"),
    ],
)
def test_a_softmax_under_a_soft_target_cross_entropy_is_fed_probabilities(loss, misfed):
    value = loss()
    (term,) = loss_graph.read(value).terms
    assert (term.kind, term.misfed) == ("soft_cross_entropy", misfed)
    assert [m.what for m in loss_inputs.find(value.grad_fn)] == [misfed]


def test_class_index_targets_keep_their_kind():
    (term,) = loss_graph.read(F.cross_entropy(X, P.argmax(1))).terms
    assert term.kind == "cross_entropy"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["mixup", "distill"])
def test_training_on_probability_targets_is_no_finding(case):
    report = watched_domain("soft_targets.py", case)
    assert report.findings == [], report.findings
    assert report.run.loss_kinds[0].terms[0].kind == "soft_cross_entropy"


@pytest.mark.slow
def test_mixups_cross_entropy_fed_a_softmax_is_a_double_softmax():
    (finding,) = watched_domain("soft_targets.py", "mixup-softmax").findings
    assert (finding.rule, finding.severity) == ("GS431", Severity.ERROR)
    assert "a double softmax" in finding.message and "drop the softmax" in finding.advice
