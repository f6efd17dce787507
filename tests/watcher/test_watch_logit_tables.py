"""A parameter a softmax reads as its very logits (DARTS's architecture weights, started
at 1e-3 * randn for a uniform choice) is in nats: its initial rms is no scale to judge
Adam's lr against, and GS419 leaves it out; the network's weight matrices under an lr far
above their initial rms are still told."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def darts():
    return domain_watched("darts_search.py", "darts")


@pytest.fixture(scope="module")
def weights_adam():
    return domain_watched("darts_search.py", "w-adam")


def test_darts_architecture_weights_are_no_matrices_to_judge_the_lr_by(darts):
    assert not darts.faults, darts.internal_error()
    loud = [f for f in darts.findings if f.severity >= Severity.WARNING]
    assert loud == [], loud


def test_the_weights_lr_far_above_their_scale_is_still_told(weights_adam):
    told = [f for f in weights_adam.findings if f.rule == "GS419"]
    assert [f.subject for f in told] == ["learning-rate (optimizer 1 (Adam))"], told
    assert told[0].severity == Severity.WARNING


def test_logit_tables_follow_views_and_constant_scalings_only():
    import torch

    from gradscope.watcher.logit_tables import LogitTables

    tables = LogitTables()
    alphas, other, w = (torch.randn(2, 4, requires_grad=True) for _ in range(3))
    tables.note(alphas[0] / 0.5)
    tables.note(other @ w.T)  # a product of two parameters: scores, not a table
    assert tables.holds(alphas)
    assert not tables.holds(other) and not tables.holds(w)
