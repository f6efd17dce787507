"""A weight matrix initialised to exactly zero (LoRA's B, a zero-init output projection or
gate) grows from nothing: its ‖Δw‖/‖w‖ is 1 at step 1, 1/2 at step 2, about 1/t whatever
the learning rate, and says nothing about it. GS419 judges the matrices that had a scale
to move against (LoRA's A): a LoRA fine-tune that learns slowly at a good lr is not told
to lower it 50×; one whose A matrices are rewritten every few steps still is."""

from __future__ import annotations

import math
import random

from watch_scripts import step_record

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import GroupSettings, LossKind, LossTerm, OptimizerSettings
from gradscope.steps.records import ParamInfo, WatchRun

ADAMW = OptimizerSettings("AdamW", 1, (GroupSettings(3e-3, 0.01, True, None, (0.9, 0.999), 1e-8),))
LM = LossKind((LossTerm("cross_entropy", "mean", 1.0, classes=64),))
ADAPTERS = (
    ParamInfo("q.lora_A", (8, 32), True, True, 1e-3, 0, 1.7),
    ParamInfo("q.lora_B", (32, 8), True, True, 1e-3, 0, 0.0),
    ParamInfo("v.lora_A", (8, 32), True, True, 1e-3, 0, 1.6),
    ParamInfo("v.lora_B", (32, 8), True, True, 1e-3, 0, 0.0),
)


def _lora_run(a_ratio: float, n: int = 60) -> WatchRun:
    """A LoRA fine-tune on a base that knows little of the task: the loss falls 5% (4.15 to
    3.95), the A matrices move by `a_ratio` of their norm a step, the B ones by 1/t."""
    rng = random.Random(0)
    steps = []
    for s in range(1, n + 1):
        loss = (3.95 + 0.2 * math.exp(-s / 20)) * math.exp(rng.gauss(0, 0.005))
        ratios = (a_ratio, 1 / s, a_ratio, 1 / s)
        steps.append(
            step_record(
                s, 0.2, loss, lrs=(3e-3,), param_norms=(0.05, 0.2, 0.05, 0.2), update_ratios=ratios
            )
        )
    return WatchRun(
        "script lora.py",
        ADAPTERS,
        tuple(steps),
        "completed",
        1.0,
        optimizers=("AdamW",),
        members=((0, 1, 2, 3),),
        loss_kinds=(LM,),
        settings=((ADAMW,),),
    )


def _lr_findings(run: WatchRun) -> list:
    return [f for f in rules.diagnose(run, Thresholds()) if f.rule == "GS419"]


def test_matrices_grown_from_zero_do_not_say_the_lr_is_too_high():
    assert _lr_findings(_lora_run(0.015)) == []


def test_a_matrices_rewritten_every_few_steps_still_do():
    (f,) = _lr_findings(_lora_run(0.1))
    assert f.severity == Severity.WARNING and "median of 2" in f.message
