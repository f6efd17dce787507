"""Optimizers that size their own step (Prodigy, D-Adaptation's Adam: each element moves by
about d·lr, d their estimate of the distance to travel, lr=1 by design) bound each
element's step whatever the gradient's scale, as Adam does. A lone gradient-norm jump while
d grows, the loss falling on, is information as under Adam (it was a GS403 warning on a
healthy run reaching full accuracy); repeated spikes still warn. Runs vendored prodigyopt
(optimizer_scripts/optim_vendor), whose update is prodigyopt/prodigy.py's
`p.addcdiv_(exp_avg, denom, value=-dlr)` over a d-scaled exp_avg and d²-scaled exp_avg_sq."""

from __future__ import annotations

import functools
import os

from gradscope.findings import Severity
from gradscope.steps.meaning import OptimizerSettings

SCRIPT = os.path.join(os.path.dirname(__file__), "optimizer_scripts", "mlp_prodigy.py")


@functools.cache
def _watched(corrupted: str):
    from gradscope.watcher import watch_script

    return watch_script(SCRIPT, ["80", corrupted])  # 1 s


def test_a_lone_jump_while_prodigys_d_grows_is_information():
    report = _watched("0")
    spikes = [f for f in report.findings if f.rule == "GS403"]
    assert [f.severity for f in spikes] == [Severity.INFO], report.findings
    assert report.run.settings[0][0].update == "adapted"
    assert "d·lr" in spikes[0].message
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings


def test_repeated_corrupted_batches_under_prodigy_still_warn():
    said = {f.rule: f for f in _watched("50,51,52").findings}
    assert said["GS403"].severity == Severity.WARNING, said
    assert said["GS414"].severity == Severity.ERROR, said


def test_an_adapted_step_is_bounded_but_its_lr_is_not_read():
    settings = OptimizerSettings("Prodigy", 1, (), "adapted")
    assert settings.bounded and not settings.adaptive and not settings.known
