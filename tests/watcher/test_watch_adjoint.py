"""GS413 on the adjoint method (tests/watcher/domain_scripts/adjoint_ode.py): a parameter of
the ODE's func left out of the parameters handed to the adjoint's Function (torchdiffeq's
adjoint_params missing it) is named by that Function, whose backward reran the func with
gradients on and returned it nothing; with every parameter handed, nothing fires."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "adjoint_ode.py"


def test_every_parameter_handed_to_the_adjoint_learns():
    findings = domain_watched(SCRIPT, "adjoint").findings
    assert [f.rule for f in findings if f.severity >= Severity.WARNING] == []


def test_a_parameter_left_out_of_the_adjoint_is_named_by_its_function():
    (f,) = [f for f in domain_watched(SCRIPT, "params").findings if f.rule == "GS413"]
    assert f.subject == "gain" and "AdjointEuler.backward" in f.message
    assert "returned it no gradient" in f.message and "AdjointEuler.apply" in f.advice


def test_a_failure_of_the_forward_hook_reaches_neither_the_run_nor_a_finding(monkeypatch):
    """The hook that tells the adjoint's rerun apart reads torch's graph task; where that
    read fails (a private API another torch lacks) the script's forwards run on, and GS413
    claims no Function from a half-kept record: the generic finding stands."""
    import torch

    def broken() -> int:
        raise RuntimeError("no graph task here")

    monkeypatch.setattr(torch._C, "_current_graph_task_id", broken)
    report = domain_watched(SCRIPT, "params", "3")
    assert report.run.status == "completed"
    (f,) = [f for f in report.findings if f.rule == "GS413"]
    assert f.subject == "gain" and "AdjointEuler" not in f.message
