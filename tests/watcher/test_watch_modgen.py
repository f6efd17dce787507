"""Modern generative objectives watched: an EDM-style denoiser with an EMA copy. A healthy run
is silent; the loss computed through the EMA copy (the optimizer over the online network) is
named as that, not as a target network to put under no_grad; an EMA whose forward keeps
gradients beside a training network is still told to go under no_grad."""

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def healthy():
    return domain_watched("ema_denoiser.py", "healthy")


@pytest.fixture(scope="module")
def ema_trained():
    return domain_watched("ema_denoiser.py", "ema-trained")


@pytest.fixture(scope="module")
def ema_grad():
    return domain_watched("ema_denoiser.py", "ema-grad")


def test_healthy_ema_denoiser_is_silent(healthy):
    assert not healthy.faults, healthy.internal_error()
    assert [f for f in healthy.findings if f.severity >= Severity.WARNING] == []


def test_loss_through_the_ema_copy_is_named(ema_trained):
    outside = [f for f in ema_trained.findings if f.rule == "GS411"]
    assert len(outside) == 4 and all(f.severity == Severity.ERROR for f in outside)
    for f in outside:
        assert "the loss is computed through the copy" in f.message, f.message
        assert "with the network the optimizer steps" in f.advice
        assert ".detach() its output" not in f.advice


def test_ema_forward_with_gradients_beside_training_is_told_no_grad(ema_grad):
    outside = [f for f in ema_grad.findings if f.rule == "GS411"]
    assert len(outside) == 4
    for f in outside:
        assert "looks like a copy of" in f.advice and "torch.no_grad()" in f.advice
        assert "computed through the copy" not in f.message


@pytest.fixture(scope="module")
def distilled():
    return domain_watched("distill_teacher.py", "healthy")


@pytest.fixture(scope="module")
def teacher_grad():
    return domain_watched("distill_teacher.py", "teacher-grad")


@pytest.fixture(scope="module")
def stale_teacher():
    return domain_watched("distill_teacher.py", "no-grad")


def test_frozen_teacher_after_its_own_training_is_silent(distilled, stale_teacher):
    for report in (distilled, stale_teacher):
        assert not report.faults, report.internal_error()
        assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


def test_teacher_differentiated_after_its_optimizer_stopped_is_named(teacher_grad):
    retired = [f for f in teacher_grad.findings if f.rule == "GS411"]
    assert len(retired) == 4 and all(f.severity == Severity.WARNING for f in retired)
    assert all(f.subject.startswith("Sequential.") for f in retired)
    for f in retired:
        assert "after step 20, the last step of its only optimizer" in f.message, f.message
        assert "requires_grad_(False)" in f.advice
