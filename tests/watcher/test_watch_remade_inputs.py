"""A tensor the script makes anew at every step with requires_grad (WGAN-GP's interpolated
input, FGSM's attacked input) is an input, not a parameter in no optimizer (GS411): the
script's name for it holds another tensor at the end. A weight kept as a plain tensor that
no optimizer holds persists, and is still named."""

from __future__ import annotations

import pytest

from tests.watcher.frozen_heap import frozen_heap  # noqa: F401  (the fixture, used by name)
from tests.watcher.watch_scripts import watched

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("frozen_heap")]


@pytest.mark.parametrize("kind", ["wgan_gp", "fgsm"])
def test_an_input_made_each_step_is_no_parameter_outside_the_optimizer(kind):
    report = watched("remade_inputs.py", kind, "30")
    assert [f for f in report.findings if f.rule == "GS411"] == [], report.findings
    assert report.run.status == "completed"


def test_a_loose_weight_no_optimizer_holds_is_still_named():
    report = watched("remade_inputs.py", "loose", "30")
    named = [f for f in report.findings if f.rule == "GS411"]
    assert [f.subject for f in named] == ["loose"], report.findings
