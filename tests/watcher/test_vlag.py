"""GS451 on fabricated runs: under Adam, a total-norm spike far above the root of its own
moving second moment (β2 from the optimizer's settings) is named at its step and explains
the spikes at and after it; the same spike under SGD, clipped to the usual size, a mild one
(×3) and a noisy healthy run stay silent."""

from __future__ import annotations

import math
import random

from gradscope.config import Settings
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.rules.step_vlag import rms_t
from gradscope.steps.meaning import GroupSettings, OptimizerSettings
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

W = ParamInfo("w", (4, 4), True, True, 0.1)
ADAM = OptimizerSettings("AdamW", 1, (GroupSettings(1e-3, betas=(0.9, 0.999), eps=1e-8),), "adam")
SGD = OptimizerSettings("SGD", 1, (GroupSettings(1e-3, momentum=0.9),), "torch")


def _records(
    spike: float = 1000.0,
    at: int = 200,
    n: int = 300,
    clip: float | None = None,
    jump: float = 3.0,
    fall: float = 0.0,
):
    """A noisy run with one gradient spike at step `at`, the loss `jump` times higher for
    the 5 steps after it and falling by `fall` (a fraction) from the first step to the last."""
    rng = random.Random(0)
    out = []
    for k in range(1, n + 1):
        norm = rng.lognormvariate(0, 0.3) * (spike if k == at else 1.0)
        level = 2.0 * (1 - fall * k / n)
        loss = level * rng.lognormvariate(0, 0.05) * (jump if at < k <= at + 5 else 1.0)
        clipped = None if clip is None else min(norm, clip)
        out.append(
            step_record(k, norm=norm, loss=loss, clipped_norm=clipped, max_norm=clip, lrs=(1e-3,))
        )
    return out


def _found(records, settings=ADAM) -> dict[str, list]:
    run = WatchRun(
        "script train.py",
        (W,),
        tuple(records),
        "completed",
        1.0,
        optimizers=(settings.kind,),
        settings=((settings,),),
    )
    out: dict[str, list] = {}
    for f in rules.judge(run, Settings()):
        out.setdefault(f.rule, []).append(f)
    return out


def test_a_large_gradient_under_adam_is_named_at_its_step_and_leads():
    found = _found(_records())
    (f,) = found["GS451"]
    assert f.steps == (200,) and "step 200" in f.message and "β2 = 0.999" in f.message
    assert f.value > 10  # 1000× the usual norm: RMS_t near its bound at step 200, √(0.18/0.001)
    (loss,) = found["GS402"]
    assert loss.explained_by == "GS451:optimizer-state" and loss.lead == 1


def test_rms_t_is_about_one_on_a_steady_run_and_bounded():
    steps = _records(spike=1.0)
    values = [x for _, x in rms_t(steps, 0.999)]
    assert all(0.3 < x < 3.0 for x in values)
    big = [x for r, x in rms_t(_records(spike=1e6), 0.999) if r.step == 200]
    assert big[0] <= math.sqrt(1000) + 1e-9


def test_what_is_no_v_lag_stays_silent():
    assert "GS451" not in _found(_records(), SGD)  # SGD keeps no second moment
    assert "GS451" not in _found(_records(clip=1.5))  # the clip bounded what Adam saw
    assert "GS451" not in _found(_records(spike=3.0))  # a mild spike
    assert "GS451" not in _found(_records(spike=1.0))


def test_a_lone_spike_the_loss_did_not_follow_is_information():
    """A DEQ's implicit backward or an unrolled inner loop: one batch's gradient jumps 20×
    alone, the loss does not jump after it and keeps falling; Adam's step was bounded."""
    (f,) = _found(_records(spike=20.0, jump=1.0, fall=0.5))["GS451"]
    assert f.severity is Severity.INFO and f.steps == (200,)
    assert "it did not: each spike was one step's" in f.message
    assert f.advice.startswith("nothing to do for a lone spike")


def test_a_lag_the_loss_followed_or_the_run_ended_on_stays_a_warning():
    followed = _found(_records(spike=20.0, jump=3.0, fall=0.5))["GS451"]
    assert [f.severity for f in followed] == [Severity.WARNING]
    unseen = _found(_records(spike=20.0, at=296, jump=1.0, fall=0.5))["GS451"]
    assert [f.severity for f in unseen] == [Severity.WARNING]  # 4 steps after it: too soon
