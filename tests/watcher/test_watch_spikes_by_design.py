"""Gradient spikes by design on real runs (GS403, and GS451 at its spikes): a hand-written
A2C (rl_scripts/own/a2c_nstep.py) whose n-step critic targets jump at every episode end, and
the pytorch/examples DCGAN over two epochs, whose discriminator's gradient jumps in turns as
the generator moves. Healthy look-alikes get no warning; a single corrupted batch, and a spike
followed by NaN, still warn. One watch per run, shared by its assertions."""

from __future__ import annotations

import os
import sys

import gymnasium  # noqa: F401  (a test dependency: CartPole)
import pytest

from gradscope.findings import Severity
from tests.watcher.test_watch_paradigms import DCGAN, GAN_ARGS, STANDINS, _forget_stand_ins

pytestmark = pytest.mark.slow

A2C = os.path.join(os.path.dirname(__file__), "rl_scripts", "own", "a2c_nstep.py")
GAN2 = " ".join(GAN_ARGS).replace("--niter 1", "--niter 2").split()
"""The DCGAN's tiny config over two epochs (the generator gets good enough to move D)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(script, args) → its watched run, once; dcgan writes checkpoints to the cwd."""
    from gradscope.watcher import watch_script

    here = os.getcwd()
    scratch = tmp_path_factory.mktemp("by-design")
    os.chdir(scratch)
    sys.path.insert(0, STANDINS)
    source = open(os.path.join(DCGAN, "dcgan.py")).read()
    line = "        errD_real = criterion(output, label)\n"
    assert line in source
    scaled = line.replace(")\n", ") * (1000.0 if i == 30 else 1.0)\n")
    (scratch / "dcgan_scaled.py").write_text(source.replace(line, scaled))
    scripts = {
        "a2c": A2C,
        "gan": os.path.join(DCGAN, "dcgan.py"),
        "gan-scaled": str(scratch / "dcgan_scaled.py"),
    }
    cache: dict = {}

    def watched(name: str, *argv: str, steps: int | None = None):
        if (name, argv, steps) not in cache:
            cache[name, argv, steps] = watch_script(scripts[name], list(argv), steps=steps)
        return cache[name, argv, steps]

    try:
        yield watched
    finally:
        os.chdir(here)
        sys.path.remove(STANDINS)
        _forget_stand_ins(os.path.dirname(DCGAN), str(scratch))


def _loud(report) -> list:
    return [(f.rule, f.message) for f in report.findings if f.severity >= Severity.WARNING]


def _one(report, rule: str):
    (f,) = [f for f in report.findings if f.rule == rule]
    return f


A2C_HEALTHY = [(), ("--optim", "adam")]
"""Stable-baselines3's defaults (RMSprop, lr 7e-4, clip 0.5); Adam unclipped. Their return
rises from ~20 to ~120-190 over 1,500 updates (run them with --updates 1500); --shared and
--huber runs have no norm spike to judge (the fabricated cases hold more heights)."""


@pytest.mark.parametrize("argv", A2C_HEALTHY)
def test_a2c_gradient_spikes_at_episode_ends_are_information(runs, argv):
    report = runs("a2c", *argv)
    assert report.run.status == "completed" and _loud(report) == [], argv
    norm = [f for f in report.findings if f.rule == "GS403"]
    for f in norm:  # the same steps as the value loss's own spikes by design
        assert f.severity == Severity.INFO and f.advice.startswith("not a fault by itself")
        assert any("whose loss spiked by design" in e for e in f.evidence)


def test_the_reported_a2c_names_its_facts(runs):
    f = _one(runs("a2c"), "GS403")
    assert "spiked at 26 step(s)" in f.message and "episode ends" in f.advice
    assert "if they grow instead, the script already clips" in f.advice


def test_one_corrupted_a2c_batch_among_episode_end_spikes_still_warns(runs):
    """The rewards of update 150 scaled by 1e4: a spike far above the episode ends' ones."""
    report = runs("a2c", "--bad-batch", "150")
    for rule in ("GS402", "GS403"):
        f = _one(report, rule)
        assert f.severity == Severity.WARNING and "step 151 reached" in f.message, rule
        assert f.steps == (151,) and f.advice.startswith("look at the batch of step 151")


def test_an_a2c_spike_followed_by_nan_still_warns(runs):
    report = runs("a2c", "--nan-at", "150", steps=160)
    assert report.findings[0].rule == "GS401" and report.findings[0].steps[0] == 151
    assert _one(report, "GS403").severity == Severity.WARNING


@pytest.mark.parametrize("seed", ["1", "2"])
def test_a_discriminator_over_two_epochs_gets_no_warning(runs, seed):
    """Seed 1 holds six turns, one of six consecutive spiking steps (two turns: the generator
    moved again before D's norm fell under the spike line); seed 2 a single turn (seed 3,
    five turns, reads the same)."""
    report = runs("gan", *GAN2, "--manualSeed", seed)
    assert report.run.status == "completed" and _loud(report) == [], seed
    f = _one(report, "GS403")
    assert "Discriminator" in f.subject and "alternate with another optimizer" in str(f.evidence)
    assert "its loss did not spike with its gradient" in str(f.evidence)
    lag = [f for f in report.findings if f.rule == "GS451"]
    assert lag and all(x.severity == Severity.INFO for x in lag)
    assert lag[0].advice.startswith("not a fault by itself")


def test_a_discriminator_loss_scaled_by_mistake_once_still_warns(runs):
    """errD_real × 1000 at batch 30 of the first epoch: D's step 61, its loss spiked too.
    Judged at step 80 (19 steps after it; the epoch's 126 name it the same)."""
    report = runs("gan-scaled", *GAN_ARGS, steps=80)
    for rule in ("GS402", "GS403", "GS451"):
        f = _one(report, rule)
        assert f.severity == Severity.WARNING and "Discriminator" in f.subject, rule
        assert "step 61" in f.message, rule
