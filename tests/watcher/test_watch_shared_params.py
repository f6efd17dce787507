"""GS456: a GAN whose discriminator optimizer was built over the generator's parameters
too, with the fake not detached, moves the generator toward the discriminator's loss at
every D step; no rule said so (the run looked like a GAN that trains badly). Silent where
nothing of G is moved by it (the fake detached, G's gradients None at D's steps), where
the discriminator's optimizer is rebuilt (one replaces the last), and on a healthy GAN."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.fixture(scope="module", params=["healthy", "detached", "reopt"])
def silent(request):
    return domain_watched("gan_shared_params.py", request.param)


@pytest.fixture(scope="module")
def shared():
    return domain_watched("gan_shared_params.py", "shared")


def test_a_generator_moved_by_the_discriminators_optimizer_is_named(shared):
    (found,) = [f for f in shared.findings if f.rule == "GS456"]  # stepped-twice
    assert found.severity == Severity.WARNING
    assert "4 parameter(s)" in found.message and "optimizer 0" in found.message
    assert "optimizer 1" in found.message


def test_a_generator_the_discriminators_optimizer_never_moves_is_silent(silent):
    assert not silent.faults, silent.internal_error()
    assert [f for f in silent.findings if f.severity >= Severity.WARNING] == [], silent.findings
