"""watch names a loss fed probabilities where it wants logits (GS431) at step 1, first in
the report, with its floor in the JSON; and says nothing on the look-alikes: a softmax that
feeds an attention, log_softmax before cross_entropy or nll_loss, a sigmoid before BCELoss
(scripts/probabilities.py)."""

from __future__ import annotations

import math

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("case", "what", "floor"),
    [
        ("clf-softmax", "double softmax", 1.4612),
        ("clf-softmax20", "double softmax", 2.0782),
        ("clf-dim0", "softmax over dim 0 (size 32)", 0.0),
        ("clf-logsm0", "log_softmax over dim 0 (size 32)", 0.0),
        ("lm-softmax", "double softmax", math.log1p(26 / math.e)),
        ("lm-seq", "softmax over dim 1 (size 8)", 0.0),
        ("lm-transpose", "double softmax", math.log1p(26 / math.e)),
        ("tag-sigmoid", "double sigmoid", 0.3133),
    ],
)
def test_a_loss_fed_probabilities_is_named_at_step_1_and_leads(case, what, floor):
    report = watched("probabilities.py", case)
    first = report.findings[0]
    assert first.rule == "GS431" and first.severity == Severity.ERROR, report.findings
    assert first.steps == (1,)
    assert what in first.message
    assert "probabilities.py:" in first.message  # where the backward was called
    assert "raw logits" in first.advice
    kind = report.to_dict()["summary"]["per_optimizer"][0]["loss_kind"]
    assert kind["lower_bound"] == pytest.approx(floor, abs=1e-4)
    assert all(f.explained_by == "GS431:loss" for f in report.findings[1:])


@pytest.mark.parametrize("case", ["clf", "clf-logsm", "clf-nll", "lm", "tag-bce", "tag"])
def test_the_look_alikes_are_said_nothing(case):
    report = watched("probabilities.py", case)
    assert [f.rule for f in report.findings if f.severity >= Severity.WARNING] == []
    assert report.run.loss_kind(0).misfed() == []
