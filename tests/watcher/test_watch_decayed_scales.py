"""GS420 on a param group without weight matrices: LSQ's quantiser step sizes given their own
group, decayed so hard that they shrink to 0; every quantiser then saturates, no gradient
passes, and the loss sits at chance. GS420 judged matrices only and left the run to 'stopped
learning' and 'the gradient fell to 0' findings with no cause; it now names the group's
decay and explains them. The step sizes without decay, or with the weights' small one,
are silent."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["healthy", "small-decay"])
def test_step_sizes_decayed_gently_or_not_at_all_are_silent(mode):
    report = domain_watched("lsq_quantiser.py", mode)
    assert not report.faults, report.internal_error()
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []


def test_step_sizes_decayed_to_zero_are_named_as_the_cause():
    report = domain_watched("lsq_quantiser.py", "decayed")
    assert not report.faults, report.internal_error()
    (decay,) = [f for f in report.findings if f.rule == "GS420"]
    assert decay.subject == "param group 1" and decay.severity == Severity.ERROR
    assert any("2.wq.s" in e for e in decay.evidence), decay.evidence
    rest = [f for f in report.findings if f is not decay]
    assert rest and all(f.explained_by == "GS420:param group 1" for f in rest), rest
