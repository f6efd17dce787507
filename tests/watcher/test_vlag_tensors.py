"""GS451 names the tensors whose own RMS_t (‖g‖/√Σv̂, from the recorded per-tensor norms)
jumped: one tensor, two of four, or every tensor alike where the whole gradient was scaled;
the per-tensor values add up to the whole gradient's, hold where a clip scaled what Adam
saw, and survive a long run whose detail the report decimated."""

from __future__ import annotations

import math
import random

from gradscope.config import Settings
from gradscope.rules import watch as rules
from gradscope.rules.step_vlag import rms_t
from gradscope.rules.vlag_tensors import tensor_rms_t
from gradscope.steps.meaning import GroupSettings, OptimizerSettings
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

NAMES = ("emb.weight", "h.0.weight", "h.1.weight", "head.weight")
SIZES = (1.0, 2.0, 3.0, 4.0)
PARAMS = tuple(ParamInfo(n, (4, 4), True, True, 0.1) for n in NAMES)
ADAM = OptimizerSettings("AdamW", 1, (GroupSettings(1e-3, betas=(0.9, 0.999), eps=1e-8),), "adam")


def _records(jumps: dict[int, float], at: int = 200, n: int = 300, clip: float | None = None):
    """Four tensors of norms about 1, 2, 3 and 4; at step `at` tensor i is ×jumps[i]."""
    rng = random.Random(0)
    out = []
    for k in range(1, n + 1):
        scale = [jumps.get(i, 1.0) if k == at else 1.0 for i in range(len(NAMES))]
        norms = [s * rng.lognormvariate(0, 0.3) * x for s, x in zip(SIZES, scale, strict=True)]
        total = math.sqrt(sum(x * x for x in norms))
        loss = 2.0 * rng.lognormvariate(0, 0.05) * (3.0 if at < k <= at + 5 else 1.0)
        out.append(
            step_record(
                k,
                norm=total,
                loss=loss,
                param_norms=tuple(norms),
                clipped_norm=None if clip is None else min(total, clip),
                max_norm=clip,
                lrs=(1e-3,),
            )
        )
    return out


def _gs451(records):
    run = WatchRun(
        "script train.py",
        PARAMS,
        tuple(records),
        "completed",
        1.0,
        optimizers=(ADAM.kind,),
        settings=((ADAM,),),
    )
    return [f for f in rules.judge(run, Settings()) if f.rule == "GS451"]


def test_one_tensor_s_jump_is_named_and_the_others_are_not():
    (f,) = _gs451(_records({0: 1000.0}))
    assert "`emb.weight`" in f.message and "jumped alike" not in f.message
    assert not any(n in f.message for n in NAMES[1:])
    assert "RMS_t of emb.weight" in " ".join(f.evidence)


def test_two_tensors_of_four_are_named():
    (f,) = _gs451(_records({1: 800.0, 3: 500.0}))
    assert "`h.0.weight`" in f.message and "`head.weight`" in f.message
    assert "`emb.weight`" not in f.message and "`h.1.weight`" not in f.message


def test_a_gradient_scaled_as_a_whole_singles_out_no_tensor():
    (f,) = _gs451(_records(dict.fromkeys(range(4), 1000.0)))
    assert "every tensor's own RMS_t jumped alike" in f.message
    assert not any(f"`{n}`" in f.message for n in NAMES)


def test_the_tensors_add_up_to_the_whole_gradient():
    """Σv of a tensor is the moving average of its squared norm, so Σ‖g_i‖² over Σ_i Σv̂_i
    is the whole gradient's RMS_t², step for step."""
    records = _records({2: 300.0})
    by_step = dict((r.step, x) for r, x in rms_t(records, 0.999))
    for at in (50, 199, 200, 201):
        ratios = dict(tensor_rms_t(records, at, 0.999, range(4)))
        r = records[at - 1]
        v_sum = sum((r.param_norms[i] / ratios[i]) ** 2 for i in range(4))
        assert math.isclose(r.grad_norm / math.sqrt(v_sum), by_step[at], rel_tol=1e-9)


def test_a_clip_scales_every_tensor_as_adam_saw_it():
    records = _records({0: 1000.0}, clip=100.0)  # clipped, still far above the usual 5
    (f,) = _gs451(records)
    assert "`emb.weight`" in f.message
    ratios = dict(tensor_rms_t(records, 200, 0.999, range(4)))
    assert ratios[0] < math.sqrt(1000) and ratios[0] > 5  # bounded as Adam's own is
    assert ratios[1] < 1.5  # the clip shrank the others at that step


def test_a_long_run_s_decimated_detail_still_names_the_tensor():
    records = _records({0: 1000.0}, at=2500, n=2600)
    (f,) = _gs451(records)
    assert f.steps == (2500,) and "`emb.weight`" in f.message
    stored = WatchRun("script train.py", PARAMS, tuple(records), "completed", 1.0).steps
    assert not all(r.detail for r in stored)  # the report kept a sample only
    exact = dict(tensor_rms_t(records, 2500, 0.999, range(4)))
    kept = dict(tensor_rms_t(list(stored), 2500, 0.999, range(4)))
    assert all(math.isclose(kept[i], exact[i], rel_tol=0.1) for i in range(4))


def test_a_step_without_detail_names_nothing_and_a_healthy_run_is_silent():
    records = _records({})
    assert _gs451(records) == []
    bare = [step_record(r.step, norm=r.grad_norm, param_norms=()) for r in records]
    assert tensor_rms_t(bare, 200, 0.999, range(4)) == []
