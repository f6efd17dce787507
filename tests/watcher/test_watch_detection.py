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
from gradscope.watcher import loss_graph
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
    both = loss_graph.union(first, LossKind((bce, ce), unknown_terms=1))
    assert [t.kind for t in both.terms] == ["binary_cross_entropy_with_logits", "cross_entropy"]
    assert both.unknown_terms == 1
    assert loss_graph.union(both, first) is both
