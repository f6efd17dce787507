"""A GAN under Lightning's manual optimization: `toggle_optimizer` freezes the
discriminator through the generator's backward, so the first scan (at the first clip)
found the generator only; the discriminator's first clip measured norms for none of its
parameters, and its first step was recorded with a gradient norm of 0 (its clip's own
total 0.25). A clip of a parameter no scan has tracked scans again
(clipping.ensure_discovered). tests/watcher/domain_scripts/toggled_gan.py steps as
Lightning does, without Lightning."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module")
def healthy():
    return domain_watched("toggled_gan.py", "healthy")


@pytest.fixture(scope="module")
def no_zero_grad():
    return domain_watched("toggled_gan.py", "no-zero-grad")


def test_each_optimizers_first_step_has_its_norms(healthy):
    assert not healthy.faults, healthy.internal_error()
    steps = healthy.run.steps
    assert [s.optimizer for s in steps[:4]] == [0, 1, 0, 1]
    for s in steps:
        assert s.grad_norm == pytest.approx(s.clip_total, rel=1e-6), (s.step, s.grad_norm)
        measured = [n for n in s.param_norms if n is not None and n >= 0]
        assert len(measured) == 4, (s.step, s.param_norms)


def test_the_toggled_gan_is_healthy(healthy):
    assert [f for f in healthy.findings if f.severity >= Severity.WARNING] == []


def test_the_discriminators_forgotten_reset_is_named_at_its_second_step(no_zero_grad):
    found = [f for f in no_zero_grad.findings if f.rule == "GS412"]
    assert found and found[0].severity == Severity.ERROR, no_zero_grad.findings
    assert "optimizer 1" in found[0].subject
    assert found[0].steps[0] == 4
