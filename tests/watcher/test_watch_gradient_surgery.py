"""A reset between the backward calls of one step that wipes nothing the step applies is no
wiped accumulation (GS435): PCGrad resets between its tasks' backward calls (each keeps the
forward's graph) and writes the combined gradient into `.grad` itself; GradNorm's weights and
a GAN's discriminator are reset by their own optimizer while the other optimizer keeps the
gradients of the same backward. CAGrad's fresh inner SGD, run to its minimum each step,
has a gradient that vanishes by right (GS405). A task's gradient reset and never written
back, an accumulation reset inside its loop and then rescaled by hand, and a discriminator
reset inside its own accumulation after the generator's backward are still named.
GradNorm's weights whose gradient is assigned by hand carry no gradient into their step
however seldom their optimizer resets (GS412); the model's optimizer that never resets
still does."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["pcgrad", "cagrad", "gradnorm", "gradnorm-assigned", "gan-order"])
def test_gradients_combined_or_reset_per_optimizer_are_not_wiped(mode):
    report = domain_watched("gradient_surgery.py", mode)
    assert report.run.status == "completed"
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], [f.message for f in loud]
    assert all(r.wiped is None for r in report.run.steps)


@pytest.mark.parametrize(
    ("mode", "lost"), [("wiped", "1 of 2"), ("averaged", "1 of 2"), ("gan-accumulated", "2 of 3")]
)
def test_a_reset_that_loses_a_backward_is_still_named(mode, lost):
    report = domain_watched("gradient_surgery.py", mode)
    (f,) = [f for f in report.findings if f.rule == "GS435"]
    assert f.severity == Severity.ERROR
    assert f"the first {lost} micro-batches were wiped" in f.message


def test_gradients_assigned_by_hand_carry_nothing_but_a_missing_reset_does():
    report = domain_watched("gradient_surgery.py", "gradnorm-no-reset")
    (f,) = [f for f in report.findings if f.rule == "GS412"]
    assert f.subject == "gradients (optimizer 0 (Adam))", f.subject
