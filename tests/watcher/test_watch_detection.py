"""A one-stage detector's loss has its box and class terms only on batches that hold an
object (tests/watcher/domain_scripts/grid_detection.py). A batch with none left an empty
target for the cross-entropy nearest the loss: the same-batch check read its first element
and the watch stopped with an internal error. And a run whose first step had no object read
the loss as objectness alone, so the step after, with all three terms, was a blow-up that
never recovered (GS414 as an error on a healthy run)."""

from __future__ import annotations

import pytest
import torch

from gradscope.findings import Severity
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.watcher import loss_kinds
from gradscope.watcher.same_batch import _by_construction
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def guarded():
    return domain_watched("grid_detection.py", "guarded")


@pytest.fixture(scope="module")
def unguarded():
    return domain_watched("grid_detection.py", "unguarded")


def test_batches_without_an_object_are_watched_to_the_end(guarded, unguarded):
    for report in (guarded, unguarded):
        assert not report.faults, report.internal_error()
        assert report.to_dict()["summary"]["per_optimizer"][0]["steps"] == 12


def test_terms_only_on_some_batches_are_no_blowup(guarded):
    assert [f for f in guarded.findings if f.severity >= Severity.WARNING] == [], guarded.findings
    kind = guarded.to_dict()["summary"]["per_optimizer"][0]["loss_kind"]
    kinds = {t["kind"] for t in kind["terms"]}
    assert {"binary_cross_entropy_with_logits", "cross_entropy"} <= kinds, kinds


def test_a_mean_over_no_positive_cell_is_named_at_its_step(unguarded):
    nan = [f for f in unguarded.findings if f.rule == "GS401"]
    assert nan and nan[0].severity == Severity.ERROR, unguarded.findings
    assert "step 1" in nan[0].message


@pytest.mark.parametrize("target", [torch.zeros(0, dtype=torch.long), torch.zeros(0, 4)])
def test_an_empty_target_is_not_the_same_by_construction(target):
    assert not bool(_by_construction(target))


def test_a_term_seen_at_a_later_step_joins_the_kind_once():
    bce = LossTerm("binary_cross_entropy_with_logits", "mean", 1.0)
    ce = LossTerm("cross_entropy", "mean", 1.0, classes=3)
    first = LossKind((bce,))
    both = loss_kinds.union(first, LossKind((bce, ce), unknown_terms=1))
    assert [t.kind for t in both.terms] == ["binary_cross_entropy_with_logits", "cross_entropy"]
    assert both.unknown_terms == 1
    assert loss_kinds.union(both, first) is both


def test_a_sum_divided_by_each_batchs_positives_is_counted_not_a_sum_over_the_batch():
    """RetinaNet's box loss: smooth-L1 summed over the matched anchors' 4 deltas, divided
    by the batch's number of positives (24 at one step, 30 at the next). Read as a sum over
    the batch, it was GS438's "effective lr × 2.17" on a run whose lr was too high."""
    first = LossKind((LossTerm("smooth_l1", "sum", 1 / 24, count=52),))
    later = LossKind((LossTerm("smooth_l1", "sum", 1 / 30, count=60),))
    (term,) = loss_kinds.union(first, later).terms
    assert term.counted and term.count == 52


@pytest.mark.parametrize(
    ("reduction", "factors"), [("sum", (0.25, 0.25)), ("sum", (1.0, 1.0)), ("mean", (0.5, 0.25))]
)
def test_a_constant_divisor_or_a_mean_is_not_counted(reduction, factors):
    """A sum divided by a constant (the batch size, 4 accumulation steps) still sums over
    the batch, and GS438 still judges it; a mean has no count to divide by."""
    kinds = [LossKind((LossTerm("mse", reduction, f, count=256),)) for f in factors]
    (term,) = loss_kinds.union(*kinds).terms
    assert not term.counted


def test_a_box_loss_divided_by_its_positives_blames_the_lr_not_the_reduction():
    report = domain_watched("anchor_boxes.py", "positives")
    rules = [f.rule for f in report.findings]
    assert "GS438" not in rules and rules[0] == "GS419", report.findings


def test_a_box_loss_summed_over_the_batch_still_names_the_reduction():
    report = domain_watched("anchor_boxes.py", "batch-sum")
    assert report.findings[0].rule == "GS438", report.findings
    assert "sum over 80 targets" in report.findings[0].message
