"""What watch should say about real training code once it knows what the loss and the
optimizer mean (issue 26): each row of matrix.py held to caught, named, cause-first and
right step, and each healthy stock run held to silence (no finding >= warning).

matrix.py prints the same verdicts as a table (`python -m tests.watcher.real.matrix`).
"""

from __future__ import annotations

import pytest

from . import matrix, runs

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("row", [pytest.param(r, id=r.case) for r in matrix.ROWS])
def test_verdict_means_what_the_run_did(row):
    verdict = matrix.judge(row, runs.watched(row.case))
    assert verdict.ok, verdict.problems()


def test_every_project_has_a_healthy_row():
    """A bug row means something only beside the same project's stock run, held to silence."""
    healthy = {r.project for r in matrix.ROWS if r.expect.rule is None}
    assert healthy == {r.project for r in matrix.ROWS}


def test_symptoms_point_to_the_missing_reset():
    """SGD with momentum and no zero_grad blows up within ~40 steps: the growth, spikes and
    NaN that follow are explained by GS412 (`explained_by` in the JSON), which leads."""
    report = runs.watched("mlp-sgd-no-zero-grad")
    first, *rest = [f.to_dict() for f in report.findings]
    assert first["rule"] == "GS412"
    assert rest and all("GS412" in str(f.get("explained_by")) for f in rest), rest


def test_zero_grad_before_step_records_step_one_loss():
    """`zero_grad()` between backward() and step(): the step still had a loss (the
    gradients went, not the loss), and watch records it."""
    step = runs.watched("nanogpt-zero-grad-before-step").run.steps[0]
    healthy = runs.watched("nanogpt").run.steps[0]
    assert step.loss == pytest.approx(healthy.loss, rel=1e-5)
