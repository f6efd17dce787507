"""What watch should say about real training code once it knows what the loss and the
optimizer mean (issue 26): each row of matrix.py held to caught, named, cause-first and
right step, and each healthy stock run held to silence (no finding >= warning).

Rows that today's rules get wrong are marked xfail (strict): they pass once the rules
land, and the marker comes off then. matrix.py prints the same verdicts as a table.
"""

from __future__ import annotations

import pytest

from . import matrix, runs

pytestmark = pytest.mark.slow

NOT_YET = pytest.mark.xfail(reason="issue 26 rules not landed", strict=True)

RIGHT_TODAY = {
    "nanogpt",
    "makemore",
    "mingpt",
    "adder-1digit",
    "gat",
    "word-lm",
    "word-lm-adamw",
    "vae",
    "mlp-adam",
    "mlp-sgd",
    "nanogpt-no-zero-grad",
    "makemore-no-zero-grad",
    "mingpt-no-zero-grad",
    "vae-no-zero-grad",
    "mlp-adam-no-zero-grad",
}
"""Rows today's watch already gets right on all four columns."""


def _param(row: matrix.Row):
    marks = () if row.case in RIGHT_TODAY else (NOT_YET,)
    return pytest.param(row, id=row.case, marks=marks)


@pytest.mark.parametrize("row", [_param(r) for r in matrix.ROWS])
def test_verdict_means_what_the_run_did(row):
    verdict = matrix.judge(row, runs.watched(row.case))
    assert verdict.ok, verdict.problems()


def test_every_project_has_a_healthy_row():
    """A bug row means something only beside the same project's stock run, held to silence."""
    healthy = {r.project for r in matrix.ROWS if r.expect.rule is None}
    assert healthy == {r.project for r in matrix.ROWS}


@NOT_YET
def test_symptoms_point_to_the_missing_reset():
    """SGD with momentum and no zero_grad blows up within ~40 steps: the growth, spikes and
    NaN that follow are explained by GS412 (`explained_by` in the JSON), which leads."""
    report = runs.watched("mlp-sgd-no-zero-grad")
    first, *rest = [f.to_dict() for f in report.findings]
    assert first["rule"] == "GS412"
    assert rest and all("GS412" in str(f.get("explained_by")) for f in rest), rest


@NOT_YET
def test_zero_grad_before_step_records_step_one_loss():
    """`zero_grad()` between backward() and step(): the step still had a loss (the
    gradients went, not the loss), and watch records it."""
    step = runs.watched("nanogpt-zero-grad-before-step").run.steps[0]
    healthy = runs.watched("nanogpt").run.steps[0]
    assert step.loss == pytest.approx(healthy.loss, rel=1e-5)
