"""A per-event cross-entropy (reduction='none') weighted by the events' mask after it, as
the Transformer Hawkes process writes its type loss: the padded events' class, clamped to
0, is the pad id the embedding read there, but their weight is 0 and the model is not
trained on them. GS465 counted them as padding in the loss. Summed with the padding in,
they are trained, and still named."""

from __future__ import annotations

import pytest

from tests.watcher.watch_scripts import domain_watched


def _rules(mode: str) -> set[str]:
    report = domain_watched("masked_events.py", mode)
    assert not report.faults, report.internal_error()
    return {f.rule for f in report.findings}


@pytest.mark.parametrize("mode", ["mul", "fill"])
def test_padded_events_weighted_out_after_the_loss_are_not_in_it(mode):
    assert "GS465" not in _rules(mode)


def test_padded_events_summed_in_are_still_named():
    assert "GS465" in _rules("unmasked")
