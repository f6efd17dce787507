"""GS450: a spike in one layer judged against that layer's own history, on fabricated runs
shaped like a small GPT's (per-tensor norms with 30-50% step-to-step noise, most of it
shared by every layer: a batch moves them together): a ×4 or ×12
total with one layer jumping 100× is named with its layer and step; healthy noise, slow
growth, a fresh model's transient, a tiny tensor's jump and sparse gradients stay silent."""

from __future__ import annotations

import math
import random
from dataclasses import replace

from gradscope.config import Settings, Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.layer_spikes import KEPT, LayerSpikes
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun
from gradscope.steps.step_store import StepStore

T = Thresholds()
NAMES = (
    "wte.weight",
    "h.0.attn.c_attn.weight",
    "h.0.mlp.c_fc.weight",
    "h.1.attn.c_attn.weight",
    "h.1.mlp.c_fc.weight",
    "ln_f.weight",
    "lm_head.weight",
    "inp.weight",
)
PARAMS = tuple(ParamInfo(n, (4, 4), True, True, 0.1) for n in NAMES)
BASE = (1.0, 1.0, 1.0, 1.0, 1.0, 0.3, 1.0, 0.1)
"""Each tensor's typical norm: `inp` (an input projection fed a mostly empty column) 0.1."""


def records(
    n: int = 300,
    seed: int = 0,
    noise: float = 0.3,
    jumps: dict[int, dict[int, float]] | None = None,
    loss_jumps: dict[int, float] | None = None,
    drift: float = 0.0,
    transient: bool = False,
    base: tuple[float, ...] = BASE,
    optimizer: int = 0,
    sparse: int | None = None,
) -> list[StepRecord]:
    """`noise`: the log-sigma of each step's factor shared by every tensor (each tensor's
    own: half of it); `jumps`: step -> {tensor: factor}; `drift`: each norm's log grows
    this much over the run; `sparse`: that tensor's grad is None on 70% of steps and 20×
    larger on a fifth of the others."""
    rng = random.Random(seed)
    out = []
    for step in range(1, n + 1):
        norms: list[float | None] = []
        batch = rng.lognormvariate(0, noise)  # a batch moves every layer's norm together
        for i, b in enumerate(base):
            v = b * batch * rng.lognormvariate(0, noise / 2) * math.exp(drift * step / n)
            if transient and step <= 10:
                v *= 30.0 / step
            v *= (jumps or {}).get(step, {}).get(i, 1.0)
            if sparse == i:
                v = None if rng.random() < 0.7 else v * (20.0 if rng.random() < 0.2 else 1.0)
            norms.append(v)
        total = math.sqrt(sum(v * v for v in norms if v is not None))
        loss = 3.0 * math.exp(-step / n) * rng.lognormvariate(0, 0.05)
        loss *= (loss_jumps or {}).get(step, 1.0)
        out.append(
            StepRecord(
                step=step,
                optimizer=optimizer,
                loss=loss,
                grad_norm=total,
                clipped_norm=None,
                max_norm=None,
                lrs=(1e-3,),
                backward_calls=1,
                scale=None,
                skipped=False,
                carried_norm=None,
                param_norms=tuple(norms),
            )
        )
    return out


def judged(recs, optimizers=("AdamW",), members=()) -> dict[str, list]:
    run = WatchRun(
        "script train.py",
        PARAMS,
        tuple(recs),
        "completed",
        1.0,
        optimizers=optimizers,
        members=members,
    )
    out: dict[str, list] = {}
    for f in rules.judge(run, Settings()):
        out.setdefault(f.rule, []).append(f)
    return out


def total_move(recs, step: int) -> float:
    totals = sorted(r.grad_norm for r in recs[step - 65 : step - 1])
    return recs[step - 1].grad_norm / totals[len(totals) // 2]


def test_a_layer_100x_under_a_4x_total_is_named_with_its_step():
    recs = records(jumps={150: {7: 100.0}})
    assert 3.5 < total_move(recs, 150) < 5.0
    found = judged(recs)
    assert "GS403" not in found
    (f,) = found["GS450"]
    assert f.subject == "inp" and f.steps == (150,)
    assert f.severity == Severity.WARNING
    assert "step 150" in f.message and "inp.weight" in f.evidence[1]
    assert "batch of step 150" in f.advice


def test_a_layer_under_a_total_that_spiked_is_named_by_the_total_spike_alone():
    recs = records(jumps={150: {5: 100.0}}, base=(1.0,) * 5 + (0.4, 1.0, 1.0))
    assert 8.0 < total_move(recs, 150) < 16.0
    found = judged(recs)
    (total,) = found["GS403"]
    assert "ln_f" in total.evidence[1] and total.explained_by is None
    assert "GS450" not in found  # one finding per spike


def test_a_layer_100x_under_a_12x_total_of_a_noisy_run_is_named():
    recs = records(jumps={150: {5: 100.0}}, base=(1.0,) * 5 + (0.4, 1.0, 1.0), noise=0.5)
    found = judged(recs)
    assert "GS403" not in found
    (f,) = found["GS450"]
    assert f.subject == "ln_f" and f.steps == (150,)


def test_the_loss_spike_of_that_step_points_to_the_layer_another_does_not():
    found = judged(records(jumps={150: {7: 100.0}}, loss_jumps={150: 8.0}))
    (loss,) = found["GS402"]
    assert loss.explained_by == "GS450:inp"
    found = judged(records(jumps={150: {7: 100.0}}, loss_jumps={220: 8.0}))
    (loss,) = found["GS402"]
    assert loss.explained_by is None


def test_several_steps_the_worst_named_and_the_total_spike_left_to_gs403():
    found = judged(records(jumps={100: {7: 100.0}, 200: {6: 50.0}, 250: {5: 40.0}}))
    (f,) = found["GS450"]
    assert f.steps == (100, 250) and f.subject == "inp" and "step 100" in f.message
    assert "step 250: ln_f.weight" in f.evidence[2]
    (total,) = found["GS403"]
    assert total.steps == (200,) and "lm_head" in total.evidence[1]


def test_early_and_late_in_a_long_run_with_decimated_detail():
    recs = records(n=3000, jumps={40: {7: 100.0}, 2900: {7: 100.0}}, seed=1)
    run = WatchRun("script train.py", PARAMS, StepStore.of(recs, detail_steps=64), "completed", 1)
    found = [f for f in rules.judge(run, Settings()) if f.rule == "GS450"]
    assert found and found[0].steps == (40, 2900)


def test_each_optimizer_judged_on_its_own():
    d = records(jumps={150: {7: 100.0}}, optimizer=0)
    g = records(seed=3, optimizer=1)
    mixed = [r for pair in zip(d, g, strict=True) for r in pair]
    found = judged(mixed, optimizers=("Adam", "Adam"), members=((6, 7), (0, 1, 2, 3, 4, 5)))
    (f,) = found["GS450"]
    assert f.subject.startswith("inp (optimizer 0")


def test_healthy_runs_are_silent():
    cases = [records(seed=s, noise=0.5) for s in range(4)] + [
        records(drift=math.log(50.0)),  # every norm grows 50× over the run: a trend
        records(transient=True),  # a fresh model's large first steps
        records(jumps={150: {5: 30.0}}, base=(1.0,) * 5 + (0.01, 1.0, 1.0)),  # tiny tensor
        records(sparse=0),  # gradients on some batches only, often 20× when there
        records(jumps={150: {7: 8.0}}),  # a jump of 8×: ordinary for a small batch
    ]
    for recs in cases:
        assert "GS450" not in judged(recs)


def test_the_tracker_keeps_a_bounded_set_of_the_largest():
    spikes = LayerSpikes()
    rng = random.Random(0)
    from array import array

    for step in range(1, 5001):
        v = rng.lognormvariate(0, 0.2)
        if step % 50 == 0:
            v *= 10.0 + step / 100
        spikes.add(step, 0, array("d", [v, 1.0]), 1.0)
    kept = spikes.found(0)
    assert len(kept) == KEPT
    assert sorted(k.step for k in kept)[KEPT // 2] > 3000


def test_a_layer_spike_in_a_script_that_clips_does_not_advise_clipping():
    """A causal LM clipped at 1.0 (tied embeddings, bf16 autocast): the spike's advice says
    the clipping caps the step, not its cause; it does not tell the script to clip."""
    recs = [replace(r, max_norm=1.0) for r in records(jumps={150: {7: 100.0}})]
    (f,) = judged(recs)["GS450"]
    assert "already clips (max_norm 1)" in f.advice and "clip the gradient norm" not in f.advice
