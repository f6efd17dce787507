"""A tensor the first backward's graph ends in, outside every model, that no later
backward reaches is that step's input made to require grad (transformers'
enable_input_require_grads() under gradient checkpointing, a batch read for its saliency,
WGAN-GP's interpolated input, FGSM's attacked one):
it holds its one gradient to the end, and is no weight left out of the optimizer (GS411).
A bare tensor the loss uses every step and no optimizer holds still is."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity

DOMAIN = os.path.join(os.path.dirname(__file__), "domain_scripts")


def _watched(name: str, *argv: str):
    from gradscope.watcher import watch_script

    return watch_script(os.path.join(DOMAIN, name), list(argv))


@pytest.mark.parametrize("mode", ["hook", "batch"])
def test_an_input_made_to_require_grad_is_no_parameter_outside_the_optimizer(mode):
    report = _watched("input_requires_grad.py", mode, "12")
    assert report.to_dict()["summary"]["per_optimizer"][0]["steps"] == 12
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    assert all(f.rule != "GS411" for f in report.findings)


@pytest.mark.parametrize("kind", ["wgan_gp", "fgsm"])
def test_an_input_made_anew_each_step_by_the_script_is_no_parameter(kind):
    report = _watched("inputs_each_step.py", kind, "30")
    assert report.run.status == "completed"
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    assert all(f.rule != "GS411" for f in report.findings), report.findings


def test_a_bare_tensor_the_loss_uses_and_no_optimizer_holds_is_named():
    report = _watched("input_requires_grad.py", "stray", "12")
    (f,) = [f for f in report.findings if f.rule == "GS411"]
    assert f.severity == Severity.ERROR and f.subject == "temperature"
    assert "gets gradients but is in no optimizer" in f.message
