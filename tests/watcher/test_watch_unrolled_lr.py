"""A learning rate learned through an unrolled inner loop: the model's weights get the
meta-gradient as a by-product, sit in no optimizer, and are moved by the script itself
(the inner loop's weights written back). Their gradients reset each step and their values
changed: information, not a layer the optimizer was built without (GS411 said so, as an
error). The same loop that never writes the weights back, whose model never changes, is
still an error."""

from __future__ import annotations

from gradscope.findings import Severity
from tests.watcher.watch_scripts import domain_watched

SCRIPT = "unrolled_lr.py"
WEIGHTS = {"0.weight", "0.bias", "2.weight", "2.bias"}


def test_weights_written_back_from_the_inner_loop_are_information():
    report = domain_watched(SCRIPT, "unrolled", "12")
    assert [f for f in report.findings if f.severity >= Severity.WARNING] == [], report.findings
    found = [f for f in report.findings if f.rule == "GS411"]
    assert {f.subject for f in found} == WEIGHTS
    assert {f.severity for f in found} == {Severity.INFO}
    assert all("moves it itself" in f.message for f in found), found


def test_weights_never_written_back_are_still_an_error():
    found = [f for f in domain_watched(SCRIPT, "no-write-back", "8").findings if f.rule == "GS411"]
    assert {f.subject for f in found} == WEIGHTS
    assert {f.severity for f in found} == {Severity.ERROR}
