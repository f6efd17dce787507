"""An input optimised beside a frozen network (a feature-visualisation image, a soft prompt,
a style-transfer image) holds data, not weights scaled to a layer: its update/weight ratio
and its lr against its initial rms say nothing of the lr (GS419), and its fixed targets
are the method, not one batch memorised (GS443). A universal perturbation ascends the
frozen classifier's cross-entropy by design: GS418 is information there, where a model
trained on a negated cross-entropy stays an error (tests/watcher/test_watch_meaning.py).
A Linear head trained beside the same frozen encoder at lr 1.0 on one batch is still named
by GS419 and GS443. An optimizer whose only tensor never required grad moves nothing at
all: an error (GS421), where frozen layers beside trained ones stay information
(tests/watcher/domain_scripts/optimised_inputs.py)."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["featvis", "prompt", "style"])
def test_an_input_optimised_beside_a_frozen_network_is_not_judged_as_weights(mode):
    report = domain_watched("optimised_inputs.py", mode)
    assert not report.faults, report.internal_error()
    assert [f for f in report.findings if f.severity >= Severity.INFO] == [], report.findings


def test_a_head_trained_beside_the_frozen_network_is_still_judged():
    report = domain_watched("optimised_inputs.py", "head")
    rules = {f.rule: f for f in report.findings}
    assert rules["GS419"].severity == Severity.WARNING
    assert "Adam moves each element by about lr = 1" in rules["GS419"].message
    assert rules["GS443"].severity == Severity.INFO


def test_an_optimizer_holding_only_a_tensor_that_never_required_grad_is_an_error():
    report = domain_watched("optimised_inputs.py", "nograd")
    (f,) = [f for f in report.findings if f.rule == "GS421"]
    assert f.severity == Severity.ERROR, f
    assert "they are all the optimizer holds: none of its steps moved anything" in f.message
    assert f.advice.startswith("give this optimizer the tensor it is meant to train")
    assert "call requires_grad_(True) on it before the forward" in f.advice


def test_an_attack_that_ascends_the_frozen_networks_loss_is_information():
    report = domain_watched("optimised_inputs.py", "uap")
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    (f,) = [f for f in report.findings if f.rule == "GS418"]
    assert "what an untargeted attack" in f.message, f.message
    assert f.advice.startswith("nothing to fix for an untargeted attack")
