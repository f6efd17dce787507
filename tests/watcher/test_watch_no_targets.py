"""A batch with no target (a masked-token batch with nothing masked: every label -100)
makes cross_entropy's mean 0/0: a NaN loss with exactly zero gradients. GS401 names that
mechanism at its step, not an overflow and the learning rate; the steps with nothing to
learn from are no trend, so no layer "vanished" (GS405) and no lr "killed" them (GS419).
A NaN that reaches the gradients is still the overflow's."""

from __future__ import annotations

import math
import os

from watch_scripts import step_record

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun

SCRIPT = os.path.join(os.path.dirname(__file__), "domain_scripts", "masked_tokens.py")
W = ParamInfo("w", (4, 4), True, True, 1e-3, 0, 1.0)
CE = LossKind((LossTerm("cross_entropy", "mean", 1.0, classes=32),))


def test_a_masked_lm_whose_batches_lose_their_targets_is_named_at_that_step():
    from gradscope.watcher import watch_script

    report = watch_script(SCRIPT, ["typo"])
    found = {f.rule: f for f in report.findings}
    first = found["GS401"]
    assert first.severity == Severity.ERROR and "at step 31" in first.message
    assert "a mean over no elements (0/0)" in first.message
    assert "learning rate" not in first.advice and "max(count, 1)" in first.advice
    assert "GS405" not in found and "GS419" not in found


def _run(values) -> WatchRun:
    steps = tuple(
        step_record(s, norm, loss, param_norms=(norm,)) for s, (loss, norm) in enumerate(values, 1)
    )
    return WatchRun("script t.py", (W,), steps, "completed", 1.0, loss_kinds=(CE,))


def _found(values) -> dict:
    return {f.rule: f for f in rules.diagnose(_run(values), Thresholds())}


def test_steps_with_no_target_are_no_vanishing_trend():
    values = [(3.0 - s / 40, 1.0) for s in range(40)]
    values += [(math.nan, 0.0) if s % 3 else (2.0, 1.0) for s in range(40)]
    found = _found(values)
    assert "GS405" not in found
    assert "0/0" in found["GS401"].message and "at step 42" in found["GS401"].message


def test_a_nan_that_reaches_the_gradients_is_still_an_overflow():
    values = [(2.0, 1.0)] * 30 + [(math.nan, math.nan)] * 10
    f = _found(values)["GS401"]
    assert "0/0" not in f.message and "learning rate" in f.advice


def test_the_masked_lm_at_its_masking_rate_is_silent():
    from gradscope.watcher import watch_script

    assert watch_script(SCRIPT, ["healthy"]).findings == []


def test_a_nan_at_the_first_step_does_not_suspect_the_learning_rate():
    """No update ran before step 1: the weights are as built, so the advice points at the
    batch and the loss's arithmetic (a time weight 1/t at t = 0), not the learning rate; a
    NaN after updates still names it."""
    first = _found([(math.nan, math.nan)] * 10)["GS401"]
    assert "not the learning rate" in first.advice and "division" in first.advice
    later = _found([(2.0, 1.0)] + [(math.nan, math.nan)] * 9)["GS401"]
    assert "check the batch of step 2 and the learning rate" in later.advice
