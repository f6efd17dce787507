"""GS453 and GS454 on fabricated runs: attention logits that grow steadily for hundreds of
steps, and an output log-partition that drifts while the loss stays, are named at the
sample first certain, and a later divergence points back with its lead; logits that rise
to a trained level and stay, one spike, a drift the loss's fall explains, a small one and
a noisy walk stay silent."""

from __future__ import annotations

import math
import random

from gradscope.config import Settings
from gradscope.rules import watch as rules
from gradscope.steps.logit_facts import AttentionSeries, OutputLogits
from gradscope.steps.meaning import GroupSettings, OptimizerSettings
from gradscope.steps.records import ParamInfo, WatchRun
from gradscope.steps.state_facts import StateFacts
from tests.watcher.watch_scripts import step_record

W = ParamInfo("w", (4, 4), True, True, 0.1)
ADAM = OptimizerSettings("AdamW", 1, (GroupSettings(1e-3, betas=(0.9, 0.95), eps=1e-8),), "adam")
SAMPLES = tuple(range(16, 801, 16))


def _run(facts: StateFacts, losses=None, n: int = 800) -> WatchRun:
    rng = random.Random(0)
    losses = losses or (lambda k: 2.0)
    records = tuple(
        step_record(
            k,
            norm=rng.lognormvariate(0, 0.2) * (1.0 if math.isfinite(losses(k)) else math.nan),
            loss=losses(k) * rng.lognormvariate(0, 0.02),
        )
        for k in range(1, n + 1)
    )
    return WatchRun(
        "script train.py",
        (W,),
        records,
        "completed",
        1.0,
        optimizers=(ADAM.kind,),
        settings=((ADAM,),),
        state_facts=facts,
    )


def _found(run: WatchRun) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in rules.judge(run, Settings()):
        out.setdefault(f.rule, []).append(f)
    return out


def _attention(values, module="h.1.attn") -> StateFacts:
    return StateFacts(attention=(AttentionSeries(module, SAMPLES, tuple(values)),))


def _growing(start: float = 3.0, end: float = 2000.0, noise: float = 0.15):
    rng = random.Random(1)
    n = len(SAMPLES)
    return [start * (end / start) ** (i / (n - 1)) * rng.lognormvariate(0, noise) for i in range(n)]


def test_attention_logits_growing_for_hundreds_of_steps_warn_before_the_divergence():
    diverged = _run(_attention(_growing()), losses=lambda k: 2.0 if k < 700 else math.nan)
    found = _found(diverged)
    (f,) = found["GS453"]
    assert f.subject == "h.1.attn" and "attention logits in `h.1.attn` grew" in f.message
    assert f.steps[0] < 600 and "qk-layernorm" in f.advice
    (nan,) = found["GS401"]
    assert nan.explained_by == "GS453:h.1.attn" and nan.lead == 700 - f.steps[0] >= 100
    assert nan.to_dict()["lead"] == nan.lead and f"warned {nan.lead} steps before" in nan.advice


def test_attention_logits_at_a_trained_level_a_spike_or_noise_stay_silent():
    trained = [min(3.0 * 1.3**i, 40.0) for i in range(len(SAMPLES))]  # sharp, then held
    high_flat = [300.0 * random.Random(i).lognormvariate(0, 0.2) for i in range(len(SAMPLES))]
    spike = [5.0] * len(SAMPLES)
    spike[30] = 5000.0
    slow = _growing(3.0, 60.0)  # 20× over 800 steps, never past 100
    for values in (trained, high_flat, spike, slow):
        assert "GS453" not in _found(_run(_attention(values)))


def test_the_module_whose_logits_grew_first_is_named_the_others_listed():
    late = [3.0] * 8 + _growing(3.0, 2000.0)[:-8]  # the same growth, 128 steps later
    facts = StateFacts(
        attention=(
            AttentionSeries("h.0.attn", SAMPLES, tuple(late)),
            AttentionSeries("h.1.attn", SAMPLES, tuple(_growing())),
        )
    )
    (f,) = _found(_run(facts))["GS453"]
    assert f.subject == "h.1.attn" and any("`h.0.attn`" in e for e in f.evidence)
    # at the same sample, the module whose logit is highest (logit_gpt.py attn-deep, seed
    # 3: 197, 196 and 556 at step 128)
    climbs = {"h.0.attn": 197.0, "h.1.attn": 196.0, "h.2.attn": 556.0}
    facts = StateFacts(
        attention=tuple(
            AttentionSeries(m, SAMPLES, (4.5, 5.6, 1.0, 1.6, 1.0, 16.8, 45.2, top) + (300.0,) * 42)
            for m, top in climbs.items()
        )
    )
    (f,) = _found(_run(facts))["GS453"]
    assert f.subject == "h.2.attn" and f.steps == (128,)


def _drift(means, classes: int = 27) -> StateFacts:
    top = tuple(m + 1.0 for m in means)
    return StateFacts(output_logits=OutputLogits(SAMPLES, tuple(means), top, classes))


def _drifting(start: float, end: float):
    rng = random.Random(2)
    n = len(SAMPLES)
    return [start + (end - start) * i / (n - 1) + rng.gauss(0, 0.2) for i in range(n)]


def test_a_log_partition_that_drifts_while_the_loss_stays_warns():
    found = _found(
        _run(_drift(_drifting(math.log(27), 25.0)), lambda k: 2.1 if k < 750 else math.nan)
    )
    (f,) = found["GS454"]
    assert f.subject == "output logits" and "drifted up" in f.message and "z-loss" in f.advice
    assert f.steps[0] < 750 and f.value >= 10
    (nan,) = found["GS401"]
    assert nan.explained_by == "GS454:output logits" and nan.lead == 750 - f.steps[0] > 0
    down = _found(_run(_drift(_drifting(math.log(27), -20.0))))
    assert "drifted down" in down["GS454"][0].message


def test_a_downward_drift_names_weight_decay_not_a_z_loss_as_its_fix():
    """Adam's downward drift (classes absent from most batches) is held by weight decay,
    not by a z-loss of 1e-4: the advice says so; an upward drift keeps the z-loss first."""
    for end, classes in ((-20.0, 27), (-12.0, 512), (-30.0, 4096)):
        drift = _drifting(math.log(classes), end)
        (f,) = _found(_run(_drift(drift, classes)))["GS454"]
        assert "drifted down" in f.message, (end, classes)
        assert f.advice.startswith("weight decay on the output head"), f.advice
        assert "absent from most batches" in f.advice and "ignores" in f.advice
    (up,) = _found(_run(_drift(_drifting(math.log(27), 25.0))))["GS454"]
    assert up.advice.startswith("add a z-loss")


def test_a_drift_the_loss_explains_a_small_one_or_a_walk_stays_silent():
    confident = _run(_drift(_drifting(3.3, 16.0)), lambda k: 5.0 - 4.0 * k / 800)
    small = _run(_drift(_drifting(3.3, 10.0)))  # 6.7 nats from ln 27: a confident model
    rng = random.Random(3)
    walk, level = [], 3.3
    for _ in SAMPLES:
        level += rng.gauss(0, 0.3)  # a healthy log Z's noise between samples
        walk.append(level)
    assert max(abs(w - math.log(27)) for w in walk) > 3
    for run in (confident, small, _run(_drift(walk))):
        assert "GS454" not in _found(run)


def test_a_log_partition_grown_by_the_logits_spread_not_their_level_stays_silent():
    """log Z is the mean logit plus the logsumexp of the centred logits: a margin that keeps
    growing (hard-example mining on separable data: log Z 1.7 to 13 while the mean logit
    stays at 0.08) moves only the second, no level a z-loss would hold. The same log Z
    whose level moves with it still warns, up and down."""
    for end in (25.0, -20.0):
        means = _drifting(math.log(27), end)
        top = tuple(m + 1.0 for m in means)
        spread = [0.08 + 0.01 * math.sin(i) for i in range(len(means))]
        level = [m - math.log(27) for m in means]
        flat = OutputLogits(SAMPLES, tuple(means), top, 27, (), tuple(spread))
        moved = OutputLogits(SAMPLES, tuple(means), top, 27, (), tuple(level))
        assert "GS454" not in _found(_run(StateFacts(output_logits=flat))), end
        (f,) = _found(_run(StateFacts(output_logits=moved)))["GS454"]
        assert ("drifted up" if end > 0 else "drifted down") in f.message


def test_a_run_of_one_or_a_few_samples_is_judged_without_a_trend():
    for n in (1, 2, 5):
        steps = SAMPLES[:n]
        facts = StateFacts(
            attention=(AttentionSeries("attn", steps, tuple(10.0**i for i in range(n))),),
            output_logits=OutputLogits(steps, tuple(30.0 * i for i in range(n)), (40.0,) * n, 27),
        )
        found = _found(_run(facts, n=16 * n))
        assert "GS453" not in found and "GS454" not in found


def test_a_climb_after_a_warm_up_bump_warns_at_its_third_rise():
    # logit_gpt.py attn-deep's `h.1.attn`: a bump in the warm-up, a dip, then orders of
    # magnitude in 48 steps; the share of rises over 128 steps stays at half until step 176
    bumped = [5.0, 17.6, 12.3, 2.9, 2.4, 1.9, 4.0, 66.0, 584.0, 1877.0, 2495.0, 3848.0]
    values = bumped + [3848.0 * 1.1**i for i in range(len(SAMPLES) - len(bumped))]
    (f,) = _found(_run(_attention(values)))["GS453"]
    assert f.steps == (144,)
    # three rises in a row below the level, or one spike after a dip, stay silent
    below = [5.0, 17.6, 12.3, 2.9, 2.4, 1.9, 4.0, 20.0, 40.0, 80.0] + [50.0] * 40
    dip_spike = [5.0, 17.6, 12.3, 2.9, 2.4, 1.9, 2.0, 1.5, 300.0, 5.0] + [5.0] * 40
    for series in (below, dip_spike):
        assert "GS453" not in _found(_run(_attention(series)))


def test_a_climb_before_128_steps_of_history_is_judged_from_the_first_sample():
    # logit_gpt.py attn-deep, seed 2: `h.2.attn` at every 16th step, from 3.7 to 131 at
    # step 96 as the warm-up ends, then its softmax collapses and the loss with it
    climbed = [3.7, 24.2, 52.1, 43.9, 44.3, 130.7, 23.9, 35.6] + [30.0] * 42
    found = _found(_run(_attention(climbed), losses=lambda k: 2.3 if k < 110 else math.nan))
    (f,) = found["GS453"]
    assert f.subject == "h.1.attn" and f.steps == (96,) and "grew 35× in 80 steps" in f.message
    assert any("10× its first sample, 2× its value 32 steps before" in e for e in f.evidence)
    (nan,) = found["GS401"]
    assert nan.explained_by == "GS453:h.1.attn" and nan.lead == 110 - 96
    # a climb every 16 steps too short to be a trend, not past 100, not 10× its first
    # sample, or slower than a doubling in 32 steps; one spike; all stay silent
    cases = (
        [3.7, 24.2, 150.0] + [140.0] * 47,
        [3.7, 24.2, 52.1, 43.9, 44.3, 90.0, 95.0, 99.0] + [99.0] * 42,
        [20.0, 24.2, 52.1, 43.9, 60.0, 130.7, 140.0, 150.0] + [150.0] * 42,
        [3.7, 30.0, 60.0, 80.0, 95.0, 105.0, 110.0, 115.0] + [115.0] * 42,
        [3.7, 3.0, 3.5, 3.2, 300.0, 3.0, 3.1, 3.3] + [3.0] * 42,
    )
    for values in cases:
        assert "GS453" not in _found(_run(_attention(values))), values
