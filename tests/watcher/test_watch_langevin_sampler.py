"""An EBM's Langevin sampler that takes the samples' gradient by `.backward()`: with the
parameters' requires_grad on and no reset after sampling, each sampler step's parameter
gradients pile into the update (GS455), though the training forward reads the sampler's
last sample, leaf and all (the last call reaches that input too). The script resetting
the input's gradient call by call, not the parameters', is what names it: the tutorial's
frozen parameters, a reset after sampling, and an accumulation over chunks of one batch
that requires grad (every call reaches it, nothing resets it) stay silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def _loud(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("mode", ["frozen", "reset", "chunks"])
def test_a_sampler_whose_parameter_gradients_are_cleared_or_never_taken_is_silent(mode):
    report = domain_watched("ebm_langevin.py", mode)
    assert _loud(report) == [], report.findings


def test_a_sampler_whose_parameter_gradients_reach_the_update_is_named():
    found = _loud(domain_watched("ebm_langevin.py", "leak"))
    assert [f.rule for f in found if f.explained_by is None] == ["GS455"], found
    assert "requires_grad off while sampling" in found[0].advice


def test_a_spectral_normed_energy_whose_last_bias_cancels_is_information():
    """E(x+).mean() - E(x-).mean() leaves the last bias exactly 0 while the tensor its
    spectral norm trains (parametrizations.weight.original) learns: an energy is defined
    up to a constant, which GS413 says as information, as for a plain weight."""
    report = domain_watched("ebm_langevin.py", "sn")
    assert _loud(report) == [], report.findings
    (found,) = [f for f in report.findings if f.rule == "GS413"]
    assert found.subject == "2.bias" and "2.parametrizations.weight.original" in found.message
