"""GS417 where every tensor of the optimizer got only zero gradients from one step on while
the loss was exactly 0 (GRPO whose every group drew one reward: every advantage 0):
information, each batch gave no signal. Gradients gone to None (a cut graph), or zeros on
one tensor while another still learns at that loss, stay warnings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules.step_progress import stopped_learning
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun
from gradscope.watcher.logistic_terms import KIND
from tests.watcher.watch_scripts import step_record


def _run(after_norm: float | None, other: float | None) -> WatchRun:
    """Two tensors learning for 15 steps; then the first gets `after_norm`, the second
    `other`, at a loss of exactly 0."""
    records = []
    for k in range(1, 41):
        learning = k <= 15
        norms = (0.1, 0.1) if learning else (after_norm, other)
        loss = -0.002 * (k % 2) if learning else -0.0
        total = sum(n or 0.0 for n in norms)
        records.append(step_record(k, total, loss=loss, param_norms=norms, lrs=(1e-3,)))
    params = tuple(ParamInfo(n, (8, 8), True, True, 1e-3) for n in ("a.weight", "b.weight"))
    return WatchRun("t", params, tuple(records), "completed", 1.0, optimizers=("AdamW",))


def test_zero_gradients_at_a_loss_of_exactly_0_are_information():
    found = stopped_learning(_run(0.0, 0.0), Thresholds())
    assert len(found) == 2 and all(f.severity == Severity.INFO for f in found)
    assert all("no signal" in f.message and "DAPO" in f.advice for f in found)


@pytest.mark.parametrize(("norm", "other", "stopped"), [(None, None, 2), (0.0, 0.1, 1)])
def test_gradients_gone_or_one_tensor_still_learning_stay_warnings(norm, other, stopped):
    found = stopped_learning(_run(norm, other), Thresholds())
    assert len(found) == stopped and all(f.severity == Severity.WARNING for f in found)
    assert not any("no signal" in f.message for f in found)


def test_a_logistic_loss_saturated_to_exactly_0_stays_a_warning():
    """trl's DPOTrainer (trl/trainer/dpo_trainer.py, loss -logsigmoid(beta * margin)) with
    beta=1000: one step puts every margin past float32's saturation, the loss reads exactly
    0 and every gradient 0 from step 2 on. Not a batch without signal: the scale is wrong."""
    run = replace(_run(0.0, 0.0), loss_kinds=(LossKind((LossTerm(KIND, "mean", 1.0),)),))
    found = stopped_learning(run, Thresholds())
    assert len(found) == 2 and all(f.severity == Severity.WARNING for f in found)
    assert not any("no signal" in f.message for f in found)
    assert all("saturation" in f.message and "beta" in f.advice for f in found)
