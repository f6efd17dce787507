"""GS454 on real runs of an MLP language model (drift_lm.py: 512 classes, 32 tokens a step,
a ReLU into the head, bf16 forward, AdamW at 3e-2, 2,500 steps): without weight decay
Adam drives every row of the head down (each class is absent from most steps, and its
small gradient of one sign becomes a step of a share of the lr), log Z with them, from 5.2
to below -5 by step 1,200 while the loss falls; GS454 names the drift and gives weight
decay as its fix. A z-loss of 1e-4 leaves the drift as it was (named the same); weight
decay 0.1 holds log Z, and the run stays silent. The drifting runs diverge from about step
11,500 of 14,000 (the loss 1.3× its best, back near the uniform guess by 14,000), two
minutes of CPU each: docs/watch.md has their lead; these tests check the warning at 2,500
steps."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest

from gradscope.findings import Severity

pytestmark = [pytest.mark.slow, pytest.mark.corpus]

SCRIPT = str(Path(__file__).with_name("drift_lm.py"))
PRECURSORS = {"GS450", "GS451", "GS452", "GS453", "GS454"}
STEPS = 2500
"""Log Z passes 10 nats below ln C between steps 1,000 and 1,500, drifting about 0.5 nat in
256 steps; GS454's 2 nats in 256 come from the samples' noise (±1 nat), so its step varies
between runs of the same drift (1,200 without the z-loss, 1,888 with it):
2,500 steps give it room."""


@functools.cache
def _run(mode: str):
    from gradscope.watcher import watch_script

    report = watch_script(SCRIPT, [mode, str(STEPS)])
    assert report.run.status == "completed", report.run.error
    return report


@pytest.mark.parametrize("mode", ["drift", "zloss"])
def test_adams_downward_drift_of_every_class_is_named_with_weight_decay_as_its_fix(mode):
    report = _run(mode)
    found = {f.rule: f for f in report.findings}
    f = found["GS454"]
    assert f.subject == "output logits" and "drifted down" in f.message
    assert 1000 <= f.steps[0] <= STEPS, f.steps
    assert f.advice.startswith("weight decay on the output head")
    assert set(found) & PRECURSORS == {"GS454"}
    logits = report.run.state_facts.output_logits
    ln_c = math.log(logits.classes)
    assert logits.mean[0] > ln_c - 2 and logits.mean[-1] < ln_c - 10  # down, not noise
    losses = [r.loss for r in report.run.steps]
    assert sum(losses[1000:1200]) < 0.8 * sum(losses[:200])  # the loss fell meanwhile


def test_weight_decay_holds_log_z_and_no_precursor_is_found():
    """(GS419, the warm-up's lr too high for these weights, and GS415, a loss on a plateau
    from step ~750, say what is true of this slower run at 2,500 steps: no precursor.)"""
    report = _run("decay")
    assert [f.rule for f in report.findings if f.rule in PRECURSORS] == []
    assert {f.rule for f in report.findings if f.severity >= Severity.WARNING} <= {"GS419", "GS415"}
    logits = report.run.state_facts.output_logits
    assert max(abs(m - math.log(logits.classes)) for m in logits.mean) < 10
