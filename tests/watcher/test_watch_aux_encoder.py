"""GS456 on a trunk two losses train, each with a head of its own: SAC-AE's and CURL's
encoder sits in the critic's Adam and in the auxiliary loss's, whose decoder or bilinear W
steps with it on the same backward. Both backwards' gradients are all stepped; that is the
method, not a tensor one optimizer should not hold (a healthy run was a warning). The
actor's optimizer holding the encoder, its loss reaching it past the critic it leaves
unstepped, is still named; so are two optimizers that both step the encoder after the
same backward (CURL's contrastive optimizer over the encoder too), said as such."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["decoder", "curl"])
def test_an_auxiliary_loss_on_the_critics_encoder_is_silent(mode):
    report = domain_watched("aux_encoder.py", mode)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


def test_the_actors_gradient_reaching_the_shared_encoder_is_named():
    report = domain_watched("aux_encoder.py", "actor-grad")
    named = [f for f in report.findings if f.rule == "GS456"]
    assert {f.severity for f in named} == {Severity.WARNING}
    assert any("optimizer 0 (Adam) and optimizer 1 (Adam)" in f.message for f in named)


def test_two_optimizers_stepping_one_backward_twice_are_named_as_such():
    report = domain_watched("aux_encoder.py", "curl-twice")
    (f,) = [f for f in report.findings if f.rule == "GS456"]
    assert "optimizer 2 (Adam" in f.message and "and optimizer 3 (Adam)" in f.message
    assert "after the same backward" in f.message and "twice" in f.message
