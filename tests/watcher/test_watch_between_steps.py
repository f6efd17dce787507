"""Backward calls made between two steps whose gradients are read and thrown away (EWC's
Fisher estimate, each call after model.zero_grad()) are no wiped accumulation (GS435): the
update after them applied as many calls as every other step. A reset inside a real
accumulation loop, from the same task switch on, still is one."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched


def test_a_fisher_estimate_between_steps_is_no_wiped_accumulation():
    report = domain_watched("continual_ewc.py", "ewc", "40")
    assert report.run.status == "completed"
    assert all(f.rule != "GS435" for f in report.findings), report.findings


def test_a_reset_inside_accumulation_after_the_switch_is_still_named():
    report = domain_watched("continual_ewc.py", "wiped", "40")
    (f,) = [f for f in report.findings if f.rule == "GS435"]
    assert f.severity == Severity.ERROR, f
    assert "the first 3 of 4 micro-batches were wiped" in f.message
