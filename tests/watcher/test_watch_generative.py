"""Generative models' training loops read as they mean: a parameter its module sets from
the first batch inside forward (Glow's ActNorm, a data-dependent initialisation through
`.data`) has its gradient taken at the point that batch set, near zero by construction: no
vanishing gradient (GS105 said so, as a warning, at inspect's first step). A gradient that
vanishes for any other reason beside it still warns, and after one optimizer step nothing is
read as set from the batch.

A GAN term weighted by 0 until its discriminator starts (VQGAN's adopt_weight) leaves the
discriminator an all-zero gradient at the first step by the schedule: information, not a dead
layer (GS106 warned); a discriminator whose ReLU is dead, or a term behind a mask that is all
off, still warns.

StyleGAN2's lazy regularisers give R1 and the path length their own backward and step every k
steps: each optimizer steps on two objectives, and the regulariser's gradient norm is judged
against its own steps, not read as a spike of the main loss's (GS403 said so, as a game's turns
that come back); a corrupted batch among the main steps is still named at its step."""

from __future__ import annotations

import os

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS, domain_watched

GLOW = os.path.join(DOMAINS, "glow_actnorm.py")
VQGAN = os.path.join(DOMAINS, "vqgan_warmup.py")
WAVENET = os.path.join(DOMAINS, "wavenet_skips.py")
DISC = {"Sequential_2.0.weight", "Sequential_2.0.bias", "Sequential_2.2.weight"}


def _inspected(*argv: str, step: int | None = None, script: str = GLOW):
    import gradscope

    return gradscope.inspect_script(script, list(argv), step=step)


@pytest.fixture(scope="module")
def first_step():
    return _inspected()


def test_actnorm_set_from_its_first_batch_is_no_vanishing_gradient(first_step):
    loud = [f for f in first_step.findings if f.severity >= Severity.WARNING]
    assert loud == [], first_step.findings
    told = [f for f in first_step.findings if f.rule == "GS105"]
    # the flow is a ModuleList its loop runs part by part: named as the list holds them
    assert {f.subject for f in told} == {"0.loc", "3.loc"}, told
    assert all("data-dependent initialisation" in f.message for f in told)


def test_a_vanishing_gradient_beside_it_still_warns():
    """The loss scaled by 1e-9: every gradient is tiny, and only the ActNorm parameters set
    from the batch are information."""
    found = [f for f in _inspected("scaled").findings if f.rule == "GS105"]
    loud = {f.subject for f in found if f.severity == Severity.WARNING}
    assert {"1.W", "2.net.2.weight", "4.W"} <= loud, found
    assert not any(s.startswith(("0.", "3.")) for s in loud), found


def test_after_an_optimizer_step_nothing_is_set_from_the_batch():
    """At step 2 every parameter moved by the optimizer's step, none by its module."""
    report = _inspected(step=2)
    assert not [f for f in report.findings if f.rule == "GS105"], report.findings


@pytest.mark.parametrize("mode", ["tensor", "float"])
def test_a_gan_term_weighted_by_zero_before_its_discriminator_starts_is_information(mode):
    report = _inspected(*([mode] if mode == "float" else []), script=VQGAN)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], report.findings
    told = [f for f in report.findings if f.rule == "GS106"]
    assert DISC <= {f.subject for f in told}, told
    assert all("multiplied by 0 at this step" in f.message for f in told)


@pytest.mark.parametrize("bug", ["dead", "mask"])
def test_a_dead_discriminator_or_a_mask_all_off_still_warns(bug):
    found = _inspected(bug, script=VQGAN).findings
    loud = {f.subject for f in found if f.rule == "GS106" and f.severity == Severity.WARNING}
    assert DISC <= loud, found


def test_a_module_whose_output_nothing_uses_is_not_told_only_of_a_cut():
    """WaveNet's last residual convolution runs and its output is never used: no gradient,
    rightly an error, but its cause is no cut graph to look for."""
    found = [f for f in _inspected(script=WAVENET).findings if f.rule == "GS101"]
    assert {f.subject for f in found} == {"res.2.weight", "res.2.bias"}, found
    assert all(f.severity == Severity.ERROR for f in found)
    assert all("nothing the loss depends on uses its output" in f.message for f in found)
    assert all("WaveNet" in f.advice for f in found)


def test_lazy_regularisers_steps_are_judged_against_their_own():
    report = domain_watched("lazy_regularised_gan.py")
    assert report.findings == [], report.findings
    side = report.run.state_facts.side_steps
    assert [(f.optimizer, len(f.steps)) for f in side] == [(0, 20), (1, 20)], side
    assert all("lazy_regularised_gan.py:" in f.site for f in side), side


def test_a_corrupted_batch_among_the_main_steps_is_still_named():
    found = domain_watched("lazy_regularised_gan.py", "spike").findings
    spike = [f for f in found if f.rule == "GS403"]
    assert len(spike) == 1 and "step 151 reached" in spike[0].message, found
    assert any(f.severity >= Severity.WARNING and "step 151" in f.message for f in found), found
