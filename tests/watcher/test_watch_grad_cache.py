"""GradCache's first backward call is made for the cached representations' gradient (leaves
in no optimizer) and no reset follows it, as in an attack by backward; but it reaches no
weight the later calls reach (a learnable logit scale at most, which only it reaches), so
nothing is applied twice: silent, where PGD without a reset stays GS455
(test_watch_input_gradients.py)."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["fixed", "scale"])
def test_grad_cache_backward_calls_are_silent(mode):
    report = domain_watched("grad_cache.py", mode)
    assert report.run.status == "completed"
    assert not [f for f in report.findings if f.severity >= Severity.WARNING]
