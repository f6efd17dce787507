"""A leaf the script differentiates against by torch.autograd.grad and keeps out of every
optimizer (IRMv1's dummy classifier scale) is a variable of a penalty, not a forgotten
weight: GS411 tells it as information; a layer left out of the optimizer is still an error."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def irm():
    return domain_watched("irm_penalty.py", "irm")


@pytest.fixture(scope="module")
def head_outside():
    return domain_watched("irm_penalty.py", "head")


def test_irm_dummy_scale_is_no_forgotten_weight(irm):
    assert not irm.faults, irm.internal_error()
    loud = [f for f in irm.findings if f.severity >= Severity.WARNING]
    assert loud == [], loud
    (told,) = [f for f in irm.findings if f.rule == "GS411"]
    assert told.severity == Severity.INFO and told.subject == "scale"
    assert "torch.autograd.grad" in told.message


def test_a_layer_outside_the_optimizer_of_an_irm_run_is_still_an_error(head_outside):
    errors = {
        f.subject
        for f in head_outside.findings
        if f.rule == "GS411" and f.severity == Severity.ERROR
    }
    assert errors == {"2.weight", "2.bias"}, head_outside.findings
    (scale,) = [f for f in head_outside.findings if f.rule == "GS411" and f.subject == "scale"]
    assert scale.severity == Severity.INFO


def test_grad_inputs_keeps_only_leaves_and_the_very_tensor():
    import torch

    from gradscope.watcher.grad_inputs import GradInputs

    seen = GradInputs()
    leaf, other = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    made = leaf * 2
    seen.note([leaf, made, torch.ones(2)])
    assert seen.holds(leaf) and not seen.holds(made) and not seen.holds(other)
    seen.note(other)
    assert seen.holds(other)
