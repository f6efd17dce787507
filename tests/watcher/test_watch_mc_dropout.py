"""Monte Carlo dropout keeps the dropouts on at evaluation on purpose: each evaluation runs
the same input through the model several times and averages. GS444 told it as an
evaluation in train mode whose fix is model.eval(), which would end the method. The same
input again at the same step is read at the forward: information that names MC dropout. A
plain evaluation over different batches in train mode keeps its model.eval() advice; a
BatchNorm folding each pass into its running statistics stays a warning. The passes drawn
as the lanes of one torch.func.vmap call with randomness='different' are MC dropout too;
a plain evaluation vmapped over batches with one mask for all keeps its advice."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def _told(mode: str):
    report = domain_watched("mc_dropout.py", mode)
    assert not report.faults, report.internal_error()
    found = [f for f in report.findings if f.rule == "GS444"]
    assert len(found) == 1 and len(report.findings) == 1, report.findings
    return found[0]


@pytest.fixture(scope="module")
def mc():
    return _told("mc")


def test_passes_on_the_same_input_are_monte_carlo_dropout(mc):
    assert mc.severity == Severity.INFO
    assert "8 times on the same input at each of 3 evaluations" in mc.message
    assert "Monte Carlo dropout" in mc.message
    assert mc.advice.startswith("nothing to fix if the passes sample the dropouts on purpose")


def test_an_evaluation_over_batches_in_train_mode_keeps_its_advice():
    f = _told("batches")
    assert f.severity == Severity.INFO and "dropped activations" in f.message
    assert "Monte Carlo" not in f.message and f.advice.startswith("call model.eval()")


def test_a_batchnorm_under_monte_carlo_passes_still_warns():
    f = _told("mc-bn")
    assert f.severity == Severity.WARNING and "running ones" in f.message


def test_lanes_of_one_vmap_call_with_a_mask_each_are_monte_carlo_dropout():
    f = _told("mc-vmap")
    assert f.severity == Severity.INFO and "randomness='different'" in f.message
    assert "Monte Carlo dropout" in f.message
    assert f.advice.startswith("nothing to fix if the lanes sample the dropouts on purpose")


def test_an_evaluation_vmapped_over_batches_with_one_mask_keeps_its_advice():
    f = _told("batches-vmap")
    assert "Monte Carlo" not in f.message and f.advice.startswith("call model.eval()")
