"""GS411 on a learned scalar no module holds, left out of the optimizer (a GFlowNet's log Z
made beside the policy and never handed to Adam): its advice is the param group it needs,
at its own rate, not the copy or fixed-network advice that fits a module. The reference
recipe, log Z in its own group at 100x the policy's lr, and detailed balance with a
state-flow head, stay silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["tb", "db"])
def test_a_gflownet_with_log_z_in_its_own_group_is_silent(mode):
    report = domain_watched("gfn_hypergrid.py", mode)
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings


def test_log_z_left_out_of_the_optimizer_gets_a_param_group_advice():
    found = [f for f in domain_watched("gfn_hypergrid.py", "logz-none").findings]
    (outside,) = [f for f in found if f.rule == "GS411"]
    assert outside.subject == "log_z" and outside.severity == Severity.ERROR
    assert "add_param_group" in outside.advice and "log_z" in outside.advice
    assert "EMA" not in outside.advice and "no_grad" not in outside.advice
