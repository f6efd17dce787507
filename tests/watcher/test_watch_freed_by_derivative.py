"""A backward that fails on a graph an autograd.grad call of the same step freed (VMC's
Laplacian taken without create_graph): the failure names that call and create_graph, not a
tensor carried over from an earlier step, which is still named where no such call ran."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_the_failure_names_the_derivative_that_freed_the_graph():
    broken = domain_watched("vmc_local_energy.py", "uncreated")
    assert not broken.faults, broken.internal_error()
    line = broken.failure() or ""
    assert "a second time" in line and "torch.autograd.grad was called without" in line
    assert "create_graph=True" in line and "carried over" not in line


def test_the_healthy_estimator_trains_without_a_finding():
    healthy = domain_watched("vmc_local_energy.py")
    assert not healthy.faults, healthy.internal_error()
    assert healthy.run.status == "completed" and len(healthy.run.steps) == 3
    assert [f for f in healthy.findings if f.severity >= Severity.WARNING] == []


def test_a_carried_state_with_no_derivative_is_still_named_so():
    line = domain_watched("tbptt_lm.py", "attached").failure() or ""
    assert ".detach() it where it is carried over" in line
    assert "torch.autograd.grad was called" not in line
