"""Losses that want log-probabilities (nll_loss, ctc_loss) fed a softmax's probabilities,
or a log_softmax over another axis than the classes. ctc_loss was an unrecognised loss: a
CTC acoustic model fed softmax (its loss below 0 and falling, whatever the targets) got a
clean verdict, and one whose log_softmax normalised the time axis got Adam and spike
warnings in place of its cause. nll_loss on a softmax was read as a plain NLL. A
log_softmax over the classes, and the log of the user's own probabilities, stay silent."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gradscope.findings import Severity
from gradscope.inspector.probe import fed_probabilities
from gradscope.watcher import loss_graph
from tests.watcher.watch_scripts import domain_watched

ARGS = (torch.tensor([[1, 2, 3, 1], [2, 2, 4, 0]]), torch.tensor([10, 9]), torch.tensor([4, 3]))


def _ctc(feed, zero_infinity=True):
    torch.manual_seed(0)
    logits = torch.randn(2, 10, 5, requires_grad=True)  # batch-first (N, T, C)
    log_probs = feed(logits).transpose(0, 1)
    return nn.CTCLoss(zero_infinity=zero_infinity)(log_probs, *ARGS)


def _misfed(loss) -> list[str | None]:
    return [t.misfed for t in loss_graph.read(loss).terms]


@pytest.mark.parametrize("zero_infinity", [True, False])
def test_ctc_loss_on_log_softmax_over_the_classes_is_read_and_right(zero_infinity):
    kind = loss_graph.read(_ctc(lambda v: F.log_softmax(v, -1), zero_infinity))
    assert [(t.kind, t.classes, t.misfed) for t in kind.terms] == [("ctc", 5, None)]
    assert kind.known


def test_ctc_loss_fed_probabilities_or_the_wrong_axis_is_named():
    assert _misfed(_ctc(lambda v: F.softmax(v, -1))) == ["softmax-not-log"]
    wrong = loss_graph.read(_ctc(lambda v: F.log_softmax(v, 1))).terms[0]
    assert wrong.misfed == "log-softmax-wrong-dim" and "dim 1 (size 10)" in wrong.misfed_detail


def test_nll_loss_fed_probabilities_is_named_and_the_log_of_them_is_not():
    torch.manual_seed(0)
    x, y = torch.randn(4, 5, requires_grad=True), torch.tensor([0, 1, 2, 3])
    assert _misfed(F.nll_loss(F.softmax(x, -1), y)) == ["softmax-not-log"]
    assert _misfed(F.nll_loss(F.softmax(x, -1).log(), y)) == [None]
    assert _misfed(F.nll_loss(F.log_softmax(x, -1), y)) == [None]


def test_inspect_reads_the_same_from_the_graph():
    assert [f.what for f in fed_probabilities(_ctc(lambda v: F.softmax(v, -1)))] == [
        "softmax-not-log"
    ]
    assert fed_probabilities(_ctc(lambda v: F.log_softmax(v, -1))) == ()


def _gs431(report):
    assert not report.faults, report.internal_error()
    return [f for f in report.findings if f.rule == "GS431"]


def test_a_healthy_ctc_run_is_not_told_about_its_inputs():
    assert _gs431(domain_watched("ctc_acoustic.py")) == []


@pytest.mark.parametrize(
    ("mode", "said"),
    [("softmax", "wants log-probabilities"), ("wrong-dim", "normalised over the wrong axis")],
)
def test_a_ctc_run_fed_the_wrong_thing_is_an_error_with_ctc_advice(mode, said):
    (f,) = _gs431(domain_watched("ctc_acoustic.py", mode))
    assert f.severity == Severity.ERROR and said in f.message, f
    assert "ctc_loss wants" in f.advice and "cross_entropy" not in f.advice
