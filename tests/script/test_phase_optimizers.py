"""A script trained in phases builds each phase's optimizer over what that phase trains
(DeeBERT: the backbone and last exit, then the early exits alone). inspect at the first
phase: the early exits, in no optimizer then, have no gradient by that phase's design
(GS101 as information); held by the optimizer, the same missing gradient stays an error."""

from __future__ import annotations

import os

import gradscope
from gradscope.findings import Severity
from tests.watcher.watch_scripts import DOMAINS

PHASES = os.path.join(DOMAINS, "early_exit_phases.py")
EARLY = {f"exits.{i}.{part}" for i in (0, 1) for part in ("weight", "bias")}


def _none_grad(report):
    return {f.subject: f for f in report.findings if f.rule == "GS101"}


def test_exits_no_optimizer_holds_yet_are_information_at_the_first_phase():
    found = _none_grad(gradscope.inspect_script(PHASES, []))
    assert set(found) == EARLY
    assert all(f.severity == Severity.INFO for f in found.values())
    assert all("no optimizer held it at this step" in f.message for f in found.values())


def test_exits_the_optimizer_holds_without_a_gradient_stay_errors():
    found = _none_grad(gradscope.inspect_script(PHASES, ["all"]))
    assert set(found) == EARLY
    assert all(f.severity == Severity.ERROR for f in found.values())


def test_the_second_phase_trains_the_exits():
    report = gradscope.inspect_script(PHASES, [], step=6)
    assert _none_grad(report) == {}
