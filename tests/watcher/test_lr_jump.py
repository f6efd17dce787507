"""GS452 on fabricated learning-rate series and runs: a sudden ×10 and a ×1.2-per-step
ramp after a steady rate are named at the step whose update applied them, and the
divergence after them points back with its lead; a warm-up, cosine decay, a restart back
to an earlier peak, a step decay, OneCycle and a slow cyclic schedule stay silent."""

from __future__ import annotations

import math

from gradscope.config import Settings
from gradscope.rules import watch as rules
from gradscope.rules.step_lr_jump import lr_rise
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun

W = ParamInfo("w", (4, 4), True, True, 0.1)


def warm(n: int, peak: float = 1e-3, warmup: int = 20) -> list[float]:
    return [peak * min(1.0, (k + 1) / warmup) for k in range(n)]


def cosine(n: int, peak: float = 1e-3, low: float = 1e-5, cycle: int | None = None) -> list:
    c = cycle or n
    return [low + 0.5 * (peak - low) * (1 + math.cos(math.pi * (k % c) / c)) for k in range(n)]


def test_a_sudden_jump_is_named_at_its_step():
    lrs = warm(300)
    lrs[200:] = [x * 10 for x in lrs[200:]]
    assert lr_rise(lrs) == (200, 200)


def test_a_ramp_is_named_once_it_doubled():
    lrs = [1e-3 * (1.2 ** max(0, k - 119)) for k in range(200)]
    start, certain = lr_rise(lrs)
    assert start == 120 and certain == 123  # 1.2^4 = 2.07


def test_schedules_that_are_no_jump_stay_silent():
    onecycle = [4e-5 + (1e-3 - 4e-5) * min(1.0, k / 90) for k in range(300)]
    cyclic = [1e-4 + 9e-4 * abs((k / 500) % 2 - 1) for k in range(3000)]
    step_decay = [1e-3 * 0.1 ** (k // 100) for k in range(300)]
    rewarm = cosine(200) + [1e-3 * min(1.0, (k + 1) / 20) for k in range(100)]
    for lrs in (
        warm(300),
        warm(3000, warmup=2000),  # a long linear warm-up: steady-looking, then rising
        cosine(300),
        cosine(600, cycle=200),  # restarts back to the peak
        onecycle,
        cyclic,
        step_decay,
        rewarm,  # decayed, then warmed up again to the same peak
        [0.0] * 50 + [1e-3] * 50,  # an lr of 0 (frozen), then the run's rate
        [1e-3] * 100,
    ):
        assert lr_rise(lrs) is None, lrs[:3]


def _run(lrs, losses, norms=None):
    recs = [
        StepRecord(
            step=k + 1,
            optimizer=0,
            loss=loss,
            grad_norm=(norms or [1.0] * len(lrs))[k],
            clipped_norm=None,
            max_norm=None,
            lrs=(lr,),
            backward_calls=1,
            scale=None,
            skipped=False,
            carried_norm=None,
            param_norms=((norms or [1.0] * len(lrs))[k],),
        )
        for k, (lr, loss) in enumerate(zip(lrs, losses, strict=True))
    ]
    run = WatchRun("script train.py", (W,), tuple(recs), "completed", 1.0, optimizers=("AdamW",))
    out: dict[str, list] = {}
    for f in rules.judge(run, Settings()):
        out.setdefault(f.rule, []).append(f)
    return out


def test_the_divergence_after_a_jump_points_back_with_its_lead():
    lrs = warm(300)
    lrs[200:] = [x * 10 for x in lrs[200:]]
    losses = [2.0 + 0.01 * (k % 3) for k in range(230)] + [math.nan] * 70
    found = _run(lrs, losses)
    (jump,) = found["GS452"]
    assert jump.steps == (201,) and "×10.0" in jump.message and "step 201" in jump.message
    (nan,) = found["GS401"]
    assert nan.explained_by == "GS452:lr" and nan.lead == 30
    assert nan.to_dict()["lead"] == 30


def test_a_divergence_before_the_jump_is_not_its_consequence():
    lrs = warm(300)
    lrs[250:] = [x * 10 for x in lrs[250:]]
    losses = [2.0] * 150 + [math.nan] * 150
    found = _run(lrs, losses)
    (nan,) = found["GS401"]
    assert nan.explained_by is None and nan.lead is None and "lead" not in nan.to_dict()


def test_a_healthy_run_with_a_restart_is_silent():
    found = _run(cosine(600, cycle=200), [2.0 * math.exp(-k / 300) for k in range(600)])
    assert "GS452" not in found


def _groups_run(groups_by_step):
    recs = [
        StepRecord(
            step=k + 1,
            optimizer=0,
            loss=2.0 * math.exp(-k / 100),
            grad_norm=1.0,
            clipped_norm=None,
            max_norm=None,
            lrs=tuple(lrs),
            backward_calls=1,
            scale=None,
            skipped=False,
            carried_norm=None,
            param_norms=(1.0,),
        )
        for k, lrs in enumerate(groups_by_step)
    ]
    run = WatchRun("script train.py", (W,), tuple(recs), "completed", 1.0, optimizers=("AdamW",))
    return [f for f in rules.judge(run, Settings()) if f.rule == "GS452"]


def _unfrozen(epoch_lrs, head=3e-3, epoch=16, at=2):
    """Lightning's BackboneFinetuning: the head alone for `at` epochs, then the backbone's
    group added at `epoch_lrs[0]` and set each epoch after to the next rate."""
    steps = [(head,)] * (at * epoch)
    for lr in epoch_lrs:
        steps += [(head, lr)] * epoch
    return steps


def test_a_group_unfrozen_mid_run_and_ramped_to_the_heads_rate_is_no_jump():
    doubled = [3e-4, 6e-4, 1.2e-3, 2.4e-3, 3e-3]  # ×2 an epoch, aligned with the head
    assert _groups_run(_unfrozen(doubled)) == []
    assert _groups_run(_unfrozen([3e-5, 3e-4, 3e-3])) == []  # ×10 an epoch, to the head's


def test_a_group_unfrozen_mid_run_that_jumps_past_the_head_is_named():
    (jump,) = _groups_run(_unfrozen([3e-4, 3e-2]))  # ×100: ten times the head's rate
    assert "param group 1" in jump.message and jump.steps == (49,)


def test_a_group_there_from_the_start_that_jumps_to_the_heads_rate_is_named():
    steps = [(3e-3, 3e-5)] * 100 + [(3e-3, 3e-3)] * 50  # a resumed run's lr in every group
    (jump,) = _groups_run(steps)
    assert "param group 1" in jump.message and jump.steps == (101,)
