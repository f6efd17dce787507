"""An EBM's replay buffer of SGLD samples written back with its graph (GS459): each chain
starts from a leaf that requires grad, so the older graph the failing backward reaches
holds only that leaf, which no optimizer holds. That is a tensor carried from batch to
batch, not a GAN's output another optimizer's loss went through (the discriminator's
story needs weights an optimizer holds). JEM's and IGEBM's loops, the samples detached,
stay silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["jem", "cd"])
def test_sgld_samples_detached_into_the_buffer_are_silent(mode):
    report = domain_watched("ebm_sgld.py", mode)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings


def test_samples_written_back_attached_are_a_carried_tensor_not_a_shared_output():
    (found,) = [f for f in domain_watched("ebm_sgld.py", "attached").findings if f.rule == "GS459"]
    assert "carried from batch to batch" in found.message, found.message
    assert "discriminator" not in found.message and "fake.detach()" not in found.advice
    assert "buffer[idx] = x.detach()" in found.advice
