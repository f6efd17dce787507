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
