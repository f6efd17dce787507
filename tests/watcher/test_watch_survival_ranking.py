"""Losses with no floor gradscope can know, over sets each batch draws: the Cox partial
likelihood (its value set by the batch's ties, censoring and risk sets, 0 on a batch with
no event) and allRank's listwise losses on padded slates (-inf scores at the padding),
all healthy (domain_scripts/survival_ranking.py): nothing above INFO."""

from __future__ import annotations

import pytest

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["cox", "cox-ties", "listnet", "listmle"])
def test_a_partial_likelihood_and_padded_listwise_losses_are_silent(mode):
    report = domain_watched("survival_ranking.py", mode)
    assert not report.faults, report.internal_error()
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == []
