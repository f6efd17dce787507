"""GS450 on a gradient that jumped and stayed at its new level: a bias before a BatchNorm
that normalises with batch statistics gets rounding noise only (~1e-8), until QAT's
`freeze_bn_stats` switches the BatchNorm to its running statistics, and from then on its
full gradient. GS450 told that step as a 2e7× spike (WARNING); it is now information that
names the switch. A jump that comes back down, and one the run ended too soon after to
tell, are still spikes; the BatchNorms frozen from the first step are still GS441's."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.test_layer_spikes import BASE, judged, records
from tests.watcher.watch_scripts import domain_watched

CANCELLED = (*BASE[:7], 1e-8)
"""`inp` a bias before a batch-statistics BatchNorm: rounding noise only."""


def _switched(at: int, n: int = 300) -> dict[int, dict[int, float]]:
    return {s: {7: 3e8} for s in range(at, n + 1)}


def test_a_bias_switched_on_by_frozen_batchnorm_statistics_is_information():
    (f,) = judged(records(base=CANCELLED, jumps=_switched(150)))["GS450"]
    assert f.severity == Severity.INFO
    assert "stayed there" in f.message and "freeze_bn_stats" in f.message
    assert "step 150" in f.advice


def test_the_same_jump_for_one_step_is_still_a_spike():
    (f,) = judged(records(base=CANCELLED, jumps={150: {7: 3e8}}))["GS450"]
    assert f.severity == Severity.WARNING and "spiked" in f.message


def test_a_jump_the_run_ended_too_soon_after_to_tell_is_still_a_spike():
    (f,) = judged(records(n=200, base=CANCELLED, jumps=_switched(192, 200)))["GS450"]
    assert f.severity == Severity.WARNING


def test_qat_freezing_batchnorm_statistics_midway_warns_of_nothing():
    report = domain_watched("qat_freeze_bn.py", "healthy")
    assert not report.faults, report.internal_error()
    assert not [f for f in report.findings if f.severity >= Severity.WARNING], report.findings
    (f,) = [f for f in report.findings if f.rule == "GS450"]
    assert f.severity == Severity.INFO and f.subject == "conv2"


def test_batchnorm_statistics_frozen_from_the_first_step_are_still_named():
    report = domain_watched("qat_freeze_bn.py", "frozen0")
    assert not report.faults, report.internal_error()
    still = [f for f in report.findings if f.rule == "GS441"]
    assert still and still[0].severity == Severity.WARNING


def test_an_optimizer_holding_one_tensor_leaves_its_spikes_to_the_total():
    """Pyro builds a torch optimizer per parameter: the one tensor is that optimizer's whole
    gradient, so no total hides its spike (a Monte Carlo ELBO's rare sample was a layer
    spike on a healthy Kalman model)."""
    jumps = {150: {7: 100.0}}
    assert "GS450" in judged(records(jumps=jumps))
    assert "GS450" not in judged(records(jumps=jumps), members=((7,),))
