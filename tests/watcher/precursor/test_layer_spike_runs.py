"""GS450 on a real run (layer_spike.py, 200 Adam steps of a 3-layer MLP): one layer's
gradient jumps 60× (a normally empty input column filled) or 27× (a one-step penalty on
the hidden layer) while the total moves about 10×, which GS403 does not call a spike; the
layer and the step are named, the loss spike of that step points to it, and the same run
without either stays silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradscope.findings import Severity

pytestmark = pytest.mark.slow

SCRIPT = str(Path(__file__).with_name("layer_spike.py"))


def _run(mode: str):
    from gradscope.watcher import watch_script

    report = watch_script(SCRIPT, [mode])
    assert report.run.status == "completed", report.run.error
    return {f.rule: f for f in report.findings}, [f.rule for f in report.findings]


def test_the_healthy_run_is_silent():
    found, _ = _run("healthy")
    assert [f for f in found.values() if f.severity >= Severity.WARNING] == []


def test_a_filled_input_column_names_the_input_layer_and_the_step():
    found, _ = _run("column")
    f = found["GS450"]
    assert f.subject == "inp" and f.steps == (150,)
    assert "GS403" not in found  # the total alone: no spike


def test_a_one_step_penalty_names_its_layer_and_the_loss_spike_points_there():
    found, order = _run("penalty")
    f = found["GS450"]
    assert f.subject == "hidden" and f.steps == (150,)
    assert found["GS402"].explained_by == "GS450:hidden"
    assert order[0] == "GS450"  # cause first
