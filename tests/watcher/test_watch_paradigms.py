"""`watch` on real code of training paradigms beyond supervised learning and RL: a GAN
(pytorch/examples' dcgan main.py) and self-distillation with an EMA teacher (lucidrains'
byol-pytorch and its README loop), vendored in paradigm_scripts/ (see ORIGIN there), at tiny
configs on synthetic images. Healthy runs get no warning or error; a real bug in each is named,
cause first, on the right optimizer and step. One watch per run, shared by its assertions."""

from __future__ import annotations

import os
import sys

import pytest

from gradscope.findings import Severity

pytestmark = pytest.mark.slow

HERE = os.path.join(os.path.dirname(__file__), "paradigm_scripts")
DCGAN = os.path.join(HERE, "pytorch_examples")
BYOL = os.path.join(HERE, "byol")
STANDINS = os.path.join(HERE, "standins")
"""torchvision (which does not load here) and einops, as far as the scripts call them."""
GAN_ARGS = (
    "--dataset fake --imageSize 64 --batchSize 16 --nz 16 --ngf 8 --ndf 8 --niter 1 "
    "--workers 0 --manualSeed 1"
).split()


STEPS = {"gan-no-zero-grad": 40, "byol-no-zero-grad": 30}
"""The bugs' runs cut at this many optimizer steps: each is named by its second or third
step, and the whole run (126 steps, 100) finds the same, and nothing more (GS412 on D's
steps 3, 5, 7; BYOL's GS412 at 2, 3, 4 and its three facts)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name → its watched run, once; the GAN's bug is a copy of main.py with netD.zero_grad()
    dropped; the stand-ins on the path (dcgan writes its checkpoints to the cwd)."""
    from gradscope.watcher import watch_script

    here = os.getcwd()
    scratch = tmp_path_factory.mktemp("paradigms")
    os.chdir(scratch)
    sys.path.insert(0, STANDINS)
    source = open(os.path.join(DCGAN, "dcgan.py")).read()
    bugged = source.replace("        netD.zero_grad()\n", "        pass\n")
    assert bugged != source
    (scratch / "dcgan_nozero.py").write_text(bugged)
    configs = {
        "gan": (os.path.join(DCGAN, "dcgan.py"), GAN_ARGS),
        "gan-no-zero-grad": (str(scratch / "dcgan_nozero.py"), GAN_ARGS),
        "byol": (os.path.join(BYOL, "train.py"), []),
        "byol-no-zero-grad": (os.path.join(BYOL, "train.py"), ["no-zero-grad"]),
    }
    cache: dict = {}

    def watched(name: str):
        if name not in cache:
            cache[name] = watch_script(*configs[name], steps=STEPS.get(name))
        return cache[name]

    try:
        yield watched
    finally:
        os.chdir(here)
        sys.path.remove(STANDINS)
        _forget_stand_ins(HERE, str(scratch))


def _forget_stand_ins(*folders: str) -> None:
    """The scripts' stand-ins (torchvision, einops) and vendored modules leave the process's
    modules: a later test must not find a torchvision that is not one."""
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) or ""
        if any(os.path.realpath(where).startswith(os.path.realpath(f)) for f in folders):
            del sys.modules[name]


def _loud(report) -> list:
    return [
        (f.rule, f.subject, f.message) for f in report.findings if f.severity >= Severity.WARNING
    ]


@pytest.mark.parametrize("name", ["gan", "byol"])
def test_healthy_runs_of_other_paradigms_get_no_warning(runs, name):
    report = runs(name)
    assert report.run.status == "completed"
    assert _loud(report) == [], name


def test_a_discriminator_whose_gradients_jump_as_the_generator_moves_is_information(runs):
    """D's gradient norm jumps when G's samples change what it sees: the facts, as info."""
    for f in runs("gan").findings:
        if f.rule == "GS403":
            assert f.severity == Severity.INFO and "alternate with another optimizer" in str(
                f.evidence
            )


def test_a_gan_discriminator_never_reset_is_named_first_on_its_own_optimizer(runs):
    report = runs("gan-no-zero-grad")
    first = report.findings[0]
    assert first.rule == "GS412" and first.severity == Severity.ERROR
    assert "Discriminator" in first.subject and "2 backward calls per step" in first.message
    assert first.steps[0] == 3  # D's second step: the first its first gradients reach
    assert "zero_grad()" in first.advice
    assert not [f for f in report.findings if f.rule == "GS412" and "Generator" in f.subject]


def test_byol_reads_its_representation_before_the_classifier_head_by_design(runs):
    """BYOL hooks the `avgpool` output; the network's fc is never in the loss: facts, info."""
    heads = [f for f in runs("byol").findings if f.rule == "GS413"]
    assert {f.subject for f in heads} == {"net.fc.weight", "net.fc.bias"}
    for f in heads:
        assert f.severity == Severity.INFO and "net.avgpool" in f.message


def test_byol_without_zero_grad_is_caught_although_its_head_never_gets_a_gradient(runs):
    """A parameter left at None (the unused head) is no reset of the others' gradients."""
    report = runs("byol-no-zero-grad")
    first = report.findings[0]
    assert first.rule == "GS412" and first.severity == Severity.ERROR
    assert "optimizer.zero_grad() is missing" in first.message and first.steps[0] == 2
