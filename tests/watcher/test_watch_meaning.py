"""watch judges a run by what its loss and optimizer mean (GS418-GS422, cause first), on a
character-level language model with one seeded bug per class (scripts/char_lm.py), each
run once per session; the loss kinds and settings as the JSON report carries them."""

from __future__ import annotations

import math

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import watched

pytestmark = pytest.mark.slow


def _run(bug: str):
    return watched("char_lm.py", bug)


def _loud(report) -> list[str]:
    return [f.rule for f in report.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("bug", ["healthy", "smoothing", "accum", "frozen", "ascent", "manual"])
def test_healthy_runs_have_no_warning(bug):
    report = _run(bug)
    assert report.run.status == "completed"
    assert _loud(report) == [], [f.message for f in report.findings]


def test_the_loss_kind_and_the_optimizer_settings_are_in_the_json():
    doc = _run("accum").to_dict()
    entry = doc["summary"]["per_optimizer"][0]
    kind = entry["loss_kind"]
    assert kind["terms"][0]["kind"] == "cross_entropy"
    assert kind["terms"][0]["classes"] == 27
    assert kind["terms"][0]["factor"] == pytest.approx(0.25)  # loss / 4 micro-batches
    assert kind["lower_bound"] == 0.0
    assert kind["uniform_guess"] == pytest.approx(math.log(27) / 4)
    group = entry["settings"][0]["groups"][0]
    assert entry["settings"][0]["kind"] == "AdamW"
    assert group["weight_decay"] == 0.01 and group["decoupled"] is True
    assert group["betas"] == [0.9, 0.999] and group["maximize"] is False
    assert doc["params"][0]["group"] == 0 and doc["params"][0]["initial_norm"] > 0


def test_a_negated_cross_entropy_is_a_maximised_loss_and_leads():
    report = _run("negated")
    first = report.findings[0]
    assert first.rule == "GS418" and first.severity == Severity.ERROR
    assert "-cross-entropy over 27 classes" in first.message
    assert "remove the minus sign" in first.advice
    for f in report.findings[1:]:
        assert f.explained_by == "GS418:loss" or f.rule not in ("GS404", "GS415", "GS419")
        assert "lower the learning rate" not in f.advice


def test_a_weight_decay_of_100_is_named_as_the_cause_of_the_vanishing():
    report = _run("decay")
    first = report.findings[0]
    assert first.rule == "GS420" and first.severity == Severity.ERROR
    assert "1/wd = 0.01" in first.message and "uniform guess over 27 classes" in first.message
    vanishing = [f for f in report.findings if f.rule == "GS405"]
    assert vanishing and all(f.explained_by == first.rule + ":" + first.subject for f in vanishing)


def test_a_learning_rate_100x_too_high_in_warm_up_is_named_with_its_numbers():
    report = _run("lr100")
    first = report.findings[0]
    assert first.rule == "GS419" and first.severity == Severity.WARNING
    assert "lr up to 0.3" in first.message and "lower the learning rate" in first.advice
    assert first.value is not None and first.value > 0.02


def test_a_frozen_layer_left_in_the_optimizer_is_information():
    report = _run("frozen")
    (finding,) = [f for f in report.findings if f.rule == "GS421"]
    assert finding.severity == Severity.INFO and "0.weight" in finding.evidence[0]


def test_zero_grad_between_backward_and_step_is_named_and_step_one_has_its_loss():
    report = _run("zero-between")
    first = report.findings[0]
    assert first.rule == "GS422" and first.severity == Severity.ERROR
    assert report.run.steps[0].loss == pytest.approx(_run("healthy").run.steps[0].loss)
    never = [f for f in report.findings if f.rule == "GS413"]
    assert never and all(f.explained_by == "GS422:optimizer.zero_grad" for f in never)


@pytest.mark.parametrize("bug", ["no-zero-adam", "no-zero-sgd"])
def test_a_missing_zero_grad_leads_and_nothing_advises_a_lower_learning_rate(bug):
    report = _run(bug)
    assert report.findings[0].rule == "GS412"
    assert all("lower the learning rate" not in f.advice for f in report.findings)


def test_maximize_true_on_a_plain_cross_entropy_is_a_maximised_loss():
    first = _run("maximize").findings[0]
    assert first.rule == "GS418" and "maximize=True" in first.message
    assert "from 3.29 at step 1" in first.message  # the script's own values, not negated
    assert "drop maximize=True" in first.advice


def test_updates_by_hand_with_gradients_never_reset_are_grads_not_reset():
    report = _run("manual-carry")
    first = report.findings[0]
    assert first.rule == "GS412" and "updates by hand" in first.message
    assert "first carried into step 2" in first.evidence[0]
    assert report.run.loss_kind(0) is not None  # read on the manual path too
