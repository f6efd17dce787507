"""A signed loss (a hinge GAN's generator loss -D(G(z)), a negated objective) drifts up
through 0 as the game goes on: its multiple of a rolling median near 0 says nothing, and
the steps it drifted by are no spike (domain_scripts/gan_losses.py). A signed loss that
jumps from where it just was (a step's loss summed by mistake) is still a spike."""

from __future__ import annotations

import random

import pytest

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules.step_common import spikes
from tests.watcher.watch_scripts import watched_domain


def _signed(drift, at=None, height=0.0, n=240, flat=130):
    """A loss flat at -0.3 (noise 0.01) for `flat` steps, then drifting up by `drift` a
    step through 0, as a hinge generator's does once its discriminator learns."""
    rng = random.Random(0)
    values = [-0.3 + drift * max(0, i - flat) + 0.01 * rng.gauss(0, 1) for i in range(n)]
    if at is not None:
        values[at] += height
    return values


@pytest.mark.parametrize("drift", [0.006, 0.01, 0.02])
def test_a_signed_loss_drifting_through_zero_has_no_spike(drift):
    assert spikes(_signed(drift), Thresholds()) == []


@pytest.mark.parametrize(("drift", "at"), [(0.006, 100), (0.006, 200), (0.01, 200), (0.0, 200)])
def test_a_signed_loss_that_jumps_from_where_it_was_is_a_spike(drift, at):
    assert [i for i, _, _ in spikes(_signed(drift, at, 1.0), Thresholds())] == [at]


@pytest.mark.slow
def test_a_hinge_gans_generator_loss_drifting_through_zero_is_no_warning():
    report = watched_domain("gan_losses.py", "hinge")
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    assert not {f.rule for f in report.findings} & {"GS402", "GS403"}


@pytest.mark.slow
def test_a_hinge_generators_loss_summed_by_mistake_once_still_spikes():
    report = watched_domain("gan_losses.py", "spike")
    (spike,) = [f for f in report.findings if f.rule == "GS402"]
    assert spike.severity == Severity.WARNING and spike.steps == (302,)
    assert "optimizer 1" in spike.subject
