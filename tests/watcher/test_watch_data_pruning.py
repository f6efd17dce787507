"""Backward calls that score examples between steps, each gradient read and reset (EL2N,
GraNd, TracIn), are not summed into the next step's loss: a fresh model's first step
applies its own batch's gradients only, as does the scorer's own next step (its scoring
calls counted as wiped, GS435 silent). A reset inside the scorer's accumulation after the
scoring, or inside the fresh model's, is still a wiped accumulation (GS435), each step's
loss that of the part applied."""

from __future__ import annotations

import json

import pytest
from watch_scripts import domain_watched

from gradscope.findings import Severity


def watched(tmp_path, mode: str):
    out = tmp_path / "oracle.json"
    report = domain_watched("data_pruning.py", str(out), mode)
    assert report.run.status == "completed", report.run.error
    return report, json.loads(out.read_text())["steps"]


@pytest.mark.parametrize("mode", ["fresh", "reset_after", "same"])
def test_scoring_backward_calls_are_in_no_step(tmp_path, mode):
    report, oracle = watched(tmp_path, mode)
    steps = report.run.steps
    applied = [s.backward_calls - (s.wiped or 0) for s in steps]
    assert applied == [o["calls"] for o in oracle]
    for s, o in zip(steps, oracle, strict=True):
        assert s.loss == pytest.approx(o["loss"], rel=1e-5), s.step
    assert not [f for f in report.findings if f.severity > Severity.INFO], report.findings


@pytest.mark.parametrize("mode", ["accumulated", "fresh-accumulated"])
def test_a_reset_inside_the_retrained_accumulation_is_still_named(tmp_path, mode):
    """Also for a fresh model's optimizer while the scorer's gradients stay in place: they
    are no other optimizer's gradients kept across the reset (a GAN's), the calls gave
    them nothing."""
    report, oracle = watched(tmp_path, mode)
    assert [f.rule for f in report.findings if f.rule == "GS435"] == ["GS435"]
    for s, o in zip(report.run.steps, oracle, strict=True):
        assert s.loss == pytest.approx(o["loss"], rel=1e-5), s.step  # the part applied
