"""A gradient norm that rises tenfold while the loss keeps falling, its fall slowing as a
descent toward a minimum does, and the optimizer's steps do not grow (a deep kernel's GP
marginal likelihood under Adam: the learned noise shrinks and the gradient grows as 1/σ²)
is the objective sharpening, told as information (GS404 at info). The same rise is still an
error where the steps grew with it (SGD past its stable step), where the loss stalled, and
where the loss fell without slowing (an unbounded objective: GS423's)."""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun
from tests.watcher.watch_scripts import step_record

STEPS = 150


def _loss(i: int, shape: str) -> float:
    if shape == "settling":  # still falling at the end, slower than at the start
        return -1.2 + 3.0 * math.exp(-i / 70)
    if shape == "unbounded":  # as fast in the second half as in the first
        return 2.0 - 0.02 * i
    return 1.0 + 0.05 * math.sin(i)  # stalled


def _run(shape: str, steps_grow: bool) -> WatchRun:
    records: list[StepRecord] = []
    for i in range(1, STEPS + 1):
        norm = 0.5 * 1.035 ** max(i - 50, 0)  # 14× over the last 100 steps, steadily
        sampled = i <= 10 or i % 25 == 1  # the update norms a watch measures
        update = (0.03 * (norm / 0.5 if steps_grow else 1.0)) if sampled else None
        records.append(step_record(i, norm, _loss(i, shape), lrs=(3e-2,), update_norm=update))
    params = (ParamInfo("feat.0.weight", (32, 3), True, True, 3e-2),)
    return WatchRun("t", params, tuple(records), "completed", 1.0, optimizers=("Adam",))


def _trend(run: WatchRun):
    return [f for f in watch.diagnose(run, Thresholds()) if f.rule == "GS404"]


def test_a_sharpening_descent_with_steady_steps_is_information():
    (found,) = _trend(_run("settling", steps_grow=False))
    assert found.severity == Severity.INFO
    assert "the objective sharpens as it is minimised" in found.message
    assert "update norm 0.03 → 0.03" in found.evidence[-1]
    assert "floor or a prior" in found.advice and "lower the learning rate" not in found.advice


def test_steps_that_grow_with_the_gradient_stay_an_error():
    (found,) = _trend(_run("settling", steps_grow=True))
    assert found.severity == Severity.ERROR and "ends in NaN" in found.advice


def test_a_stalled_loss_keeps_the_error():
    (found,) = _trend(_run("stalled", steps_grow=False))
    assert found.severity == Severity.ERROR


def test_a_fall_that_does_not_slow_keeps_the_error():
    (found,) = _trend(_run("unbounded", steps_grow=False))
    assert found.severity == Severity.ERROR
