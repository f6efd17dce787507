"""A temporal point process scores event i from the state before it: the encoder's output
moved one position later (`cat([h0, h[:, :-1]], 1)` or a pad at the front and the last
position cut). The marks' gather then reads, at position i, a state that read marks
before i only; GS445 took the embedding of the same marks for the answer fed to the
model. A state that read event i before scoring it is the leak, and still named."""

from __future__ import annotations

import pytest

from tests.watcher.watch_scripts import domain_watched


def _rules(mode: str) -> set[str]:
    report = domain_watched("point_process.py", mode)
    assert not report.faults, report.internal_error()
    return {f.rule for f in report.findings}


@pytest.mark.parametrize("mode", ["cat", "pad"])
def test_a_state_shifted_after_its_encoder_is_no_copy(mode):
    assert "GS445" not in _rules(mode)


def test_a_state_that_read_the_scored_mark_is_still_a_leak():
    assert "GS445" in _rules("peek")
