"""Backward calls made for an input's gradient (PGD's attack on `x + delta`, a saliency
map), whose parameter gradients the script then clears with model.zero_grad() before the
training backward, are no wiped accumulation (GS435): the reset's last backward reached a
leaf that is neither a parameter nor any optimizer's, and gave it a gradient. The attack's
in-place moves of `delta` before the first optimizer step are an update by hand of `delta`
alone: the model gradients it never moved are not "carried over" (GS412). The wiped
accumulation after an attack, and a model updated by hand without a reset, still fire;
an attack whose parameter gradients no reset clears before the step is named (GS455)."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def _loud(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("mode", ["backward", "grad", "saliency"])
def test_input_gradient_calls_before_the_training_backward_are_silent(mode):
    report = domain_watched("pgd_train.py", mode)
    assert _loud(report) == [], report.findings
    per = report.to_dict()["summary"]["per_optimizer"]
    assert per[-1]["steps"] == 40


@pytest.mark.parametrize("mode", ["forward", "inverse"])
def test_a_pinns_collocation_points_are_no_parameter_outside_the_optimizer(mode):
    """Points drawn with requires_grad each step keep the gradient of the backward that
    reached them: the first step's are tracked, their gradient never changes after it, and
    they are no trainable tensor the optimizer left out (GS411 said so, as an error)."""
    report = domain_watched("pinn_fit.py", mode)
    assert _loud(report) == [], report.findings
    assert [p["steps"] for p in report.to_dict()["summary"]["per_optimizer"]] == [30, 4]


def test_a_pinns_coefficient_left_out_of_the_optimizer_is_still_named():
    """The inverse problem's coefficient, a plain tensor every backward reaches, in no
    optimizer: its gradient changes (and piles up) at every step, so GS411 stands."""
    found = [f for f in _loud(domain_watched("pinn_fit.py", "forgot")) if f.rule == "GS411"]
    assert len(found) == 1 and found[0].severity == Severity.ERROR, found


def test_a_long_attack_before_the_first_step_is_an_update_of_delta_alone():
    """PGD-30 by backward: its 30 moves of `delta` before the optimizer's first step are
    an update by hand of `delta`, not of the model it never moved (GS410 read the model's
    weights as not updated, its ratio 0 at those steps)."""
    report = domain_watched("pgd_train.py", "backward", "30")
    assert _loud(report) == [], report.findings
    per = report.to_dict()["summary"]["per_optimizer"]
    assert [p["steps"] for p in per] == [30, 40]


def test_the_training_step_takes_only_its_own_backward_call():
    rows = domain_watched("pgd_train.py", "backward").to_dict()["steps"]
    trained = [r for r in rows if r["optimizer"] == max(r["optimizer"] for r in rows)]
    assert {r["backward_calls"] for r in trained[1:]} == {1}


def test_a_wiped_accumulation_after_an_attack_is_still_named():
    rules = {f.rule for f in _loud(domain_watched("pgd_train.py", "wiped"))}
    assert "GS435" in rules


def test_an_attacks_parameter_gradients_left_for_the_step_are_named():
    """PGD without model.zero_grad(): the update sums the attack's calls and the training
    call (GS455), not a wiped accumulation (GS435)."""
    found = [f for f in _loud(domain_watched("pgd_train.py", "leak")) if f.rule == "GS455"]
    assert len(found) == 1, found
    assert found[0].severity == Severity.ERROR
    assert "GS435" not in {f.rule for f in _loud(domain_watched("pgd_train.py", "leak"))}


def test_a_gradient_penaltys_own_backward_before_the_critics_is_silent():
    """WGAN-GP's penalty reaches its interpolated input through a gradient taken with
    create_graph: its parameter gradients are the step's, not an attack's (GS455)."""
    assert "GS455" not in {f.rule for f in domain_watched("gp_first.py").findings}


def test_a_model_updated_by_hand_without_a_reset_is_still_named():
    rules = {f.rule for f in _loud(domain_watched("pgd_train.py", "manual"))}
    assert "GS412" in rules
