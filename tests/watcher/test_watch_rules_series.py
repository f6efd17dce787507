"""The time-series verdicts on fabricated runs shaped like measured ones (no torch): several
optimizers, the run that gets worse, AMP clipping before unscale_, clipping strength,
advice that fits the script, parameters that stop learning, GS401's wording.

Numbers mimic real runs: nanoGPT shakespeare_char at 100× its learning rate (loss ~4.2 →
6.9 at steps 5-10, grad norm 106, then a plateau), a tiny transformer at lr 0.3 (4.3 →
19.3 in 7 steps, then chance level), small-batch losses with 20-30% step-to-step noise,
a fresh model's larger norm in its first steps."""

from __future__ import annotations

import math
import random

from watch_scripts import step_record

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import step_clipping
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import MANUAL, ParamInfo, StepRecord, WatchRun

T = Thresholds()
W = ParamInfo("w", (4, 4), True, True, 0.1)
CHARS = LossKind((LossTerm("cross_entropy", "mean", 1.0, classes=65),))
"""nanoGPT shakespeare_char's loss: a cross-entropy over 65 characters (ln 65 = 4.17)."""


def rec(step: int, loss: float | None, norm: float, **kw) -> StepRecord:
    return step_record(step, norm, loss, **{"lrs": (1e-3,), **kw})


def run_of(
    records, params=(W,), optimizers=("AdamW",), members=(), label="script train.py", kind=CHARS
):
    return WatchRun(
        label,
        tuple(params),
        tuple(records),
        "completed",
        1.0,
        optimizers=optimizers,
        members=members,
        loss_kinds=(kind,) * len(optimizers),
    )


def found(run, t=T) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in rules.diagnose(run, t):
        out.setdefault(f.rule, []).append(f)
    return out


def healthy(n=300, noise=0.25, seed=0, start=4.2, floor=1.2, tau=60.0, transient=True, **kw):
    """A healthy run: loss decays to a floor with multiplicative noise; the first 3 steps'
    norm is larger (a fresh model's transient), then ~1 with 20% noise."""
    rng = random.Random(seed)
    out = []
    for s in range(1, n + 1):
        loss = (floor + (start - floor) * math.exp(-s / tau)) * math.exp(rng.gauss(0, noise))
        norm = (3.0 if transient and s <= 3 else 1.0) * math.exp(rng.gauss(0, 0.2))
        out.append(rec(s, loss, norm, **kw))
    return out


# -- the run that gets worse (GS414 / GS415) ---------------------------------------------
def nanogpt_high_lr(n=250):
    """nanoGPT shakespeare_char at 100× its lr: the damage during warm-up, then a plateau
    at ~3.4 (healthy: ~2.8 by then); clipped at 1.0."""
    rng = random.Random(1)
    out = []
    for s in range(1, n + 1):
        if s <= 4:
            loss, norm = 4.2 + 0.05 * s, 2.0 + 0.5 * s
        elif s <= 10:
            loss, norm = 6.9, 106.0 if s == 7 else 40.0
        else:
            loss = 3.4 + 2.0 * math.exp(-(s - 10) / 8)
            norm = 0.6
        loss *= math.exp(rng.gauss(0, 0.02))
        out.append(rec(s, loss, norm, max_norm=1.0, lrs=(min(1.0, s / 100) * 0.1,)))
    return out


def tiny_transformer_lr_03(n=100):
    rng = random.Random(2)
    climb = [4.3, 5.9, 8.4, 11.0, 14.2, 17.5, 19.3, 15.0, 9.0, 6.0]
    out = []
    for s in range(1, n + 1):
        loss = climb[s - 1] if s <= len(climb) else 4.16 * math.exp(rng.gauss(0, 0.01))
        norm = 1.9 if s == 1 else (20.0 if s <= 10 else 0.3)
        out.append(rec(s, loss, norm, lrs=(0.3,)))
    return out


def test_nanogpt_blown_up_in_warm_up_is_an_error_naming_steps_and_values():
    f = found(run_of(nanogpt_high_lr()))
    (b,) = f["GS414"]
    assert b.severity == Severity.ERROR and "never recovered" in b.message
    assert "around step" in b.message and "106" in b.message and "step 7" in b.message
    assert "lower the learning rate" in b.advice and "warm-up" in b.advice
    assert "clipping at max_norm 1 was on" in b.advice
    assert b.evidence[0].startswith("loss at steps 1-")
    assert "GS415" not in f  # one verdict for one story
    assert "GS403" not in f  # the early norm spike is the blow-up's, said once
    assert "GS406" not in f  # clipping binds in the blow-up only


def test_tiny_transformer_stuck_at_chance():
    (b,) = found(run_of(tiny_transformer_lr_03()))["GS414"]
    assert b.severity == Severity.ERROR and "never recovered" in b.message
    assert b.value > 4 and "4.3" in b.message


def test_blowup_that_recovered_is_a_warning():
    recs = tiny_transformer_lr_03()
    recs = recs[:10] + [
        rec(r.step, 1.5 + 2.6 * math.exp(-(r.step - 10) / 10), 0.3) for r in recs[10:]
    ]
    (b,) = found(run_of(recs))["GS414"]
    assert b.severity == Severity.WARNING and "came back to" in b.message


def test_loss_rise_without_a_norm_rise_counts_only_if_it_stuck():
    stuck = [rec(r.step, r.loss, 1.0, lrs=r.lrs) for r in tiny_transformer_lr_03()]
    (b,) = found(run_of(stuck))["GS414"]
    assert b.message.startswith("in the first steps the loss rose above where it started")
    assert b.severity == Severity.ERROR
    recovered = stuck[:10] + [
        rec(r.step, 1.5 + 2.6 * math.exp(-(r.step - 10) / 10), 1.0) for r in stuck[10:]
    ]
    assert "GS414" not in found(run_of(recovered))  # a data shift that passed, not the lr


def test_no_progress_fires_on_a_flat_run_and_says_clipping_is_on():
    rng = random.Random(3)
    recs = [rec(s, 4.16 * math.exp(rng.gauss(0, 0.25)), 2.0, max_norm=1.0) for s in range(1, 201)]
    (f,) = found(run_of(recs))["GS415"]
    assert "no better than where it started" in f.message
    assert "clipping is already on" in f.advice
    assert f.severity == Severity.WARNING


def test_loss_that_rose_is_no_progress():
    recs = [rec(s, 1.0 + s / 100, 1.0) for s in range(1, 101)]
    assert "GS415" in found(run_of(recs))


def test_healthy_runs_are_silent():
    for seed in range(5):
        assert found(run_of(healthy(seed=seed, noise=0.3))) == {}, seed  # 30% noise
        assert found(run_of(healthy(seed=seed, noise=0.2, tau=15))) == {}, seed  # plateaus early
    # a late plateau: falls for 80 steps, then flat for 220
    assert found(run_of(healthy(tau=20, floor=1.5, noise=0.05))) == {}
    # short runs: too few steps to say anything about progress
    assert found(run_of(healthy(n=30, tau=1e9))) == {}


def test_no_loss_no_progress_verdicts():
    recs = [rec(r.step, None, r.grad_norm) for r in tiny_transformer_lr_03()]
    f = found(run_of(recs))
    assert "GS414" not in f and "GS415" not in f


def test_early_spike_against_the_first_steps():
    recs = healthy(n=60, noise=0.05)
    recs[9] = rec(10, recs[9].loss, 40.0)  # a bad batch at step 10: before 32 steps of history
    (f,) = found(run_of(recs))["GS403"]
    assert "step 10" in f.message and "first steps" in f.message
    # a fresh model's larger first steps are not spikes
    assert "GS403" not in found(run_of(healthy(n=60, noise=0.05)))


def test_a_loss_that_falls_to_zero_did_fall():
    params = (ParamInfo("a.w", (4, 4), True, True, 0.1), ParamInfo("b.w", (4, 4), True, True, 0.1))
    recs = [
        rec(s, 0.0 if s > 20 else 1.0 / s, 1.0, param_norms=(0.0 if s > 20 else 1.0, 1.0))
        for s in range(1, 101)
    ]
    assert "GS405" not in found(run_of(recs, params))


def test_a_deterministic_solve_at_its_minimum_is_no_vanishing():
    """A small inner solve (CAGrad's task weights, 20 SGD steps of a convex objective):
    its loss stops moving at float32 resolution, its gradient falls 1e6x by right. The same
    fall under a loss that still moves with its batches is dead units."""
    level = 0.06332037597894669

    def solve(loss_of):
        return [rec(s, loss_of(s), 10.0 ** -(s / 4) if s > 1 else 0.4) for s in range(1, 25)]

    assert "GS405" not in found(run_of(solve(lambda s: level if s > 1 else 4.1)))
    noisy = random.Random(0)
    batches = solve(lambda s: level * (1 + 0.05 * noisy.gauss(0, 1)))
    assert [f.rule for f in found(run_of(batches)).get("GS405", [])] == ["GS405"]


# -- several optimizers ------------------------------------------------------------------
GAN_PARAMS = (
    ParamInfo("D.w", (4, 4), True, True, 1e-3),
    ParamInfo("G.w", (4, 4), True, True, 1e-3),
)


def gan(n=200, g_spike=None, d_carried=False):
    """D and G steps alternate; D's norm ~10, G's ~1; each steps its own parameter."""
    rng = random.Random(4)
    out = []
    for s in range(1, 2 * n + 1):
        d = s % 2 == 1
        norm = (10.0 if d else 1.0) * math.exp(rng.gauss(0, 0.1))
        if not d and g_spike is not None and s == g_spike:
            norm = 8.0
        loss = (0.69 if d else 2.0) * math.exp(rng.gauss(0, 0.1))
        out.append(
            rec(
                s,
                loss,
                norm,
                optimizer=0 if d else 1,
                param_norms=(norm, None) if d else (None, norm),
                carried_norm=0.5 if d and d_carried and s > 1 else None,
            )
        )
    return out


def gan_run(records):
    return run_of(records, GAN_PARAMS, ("Adam", "Adam"), ((0,), (1,)))


def test_each_optimizer_is_its_own_series():
    f = found(gan_run(gan(g_spike=300)))
    (spike,) = f["GS403"]
    assert spike.message.startswith("optimizer 1 (Adam") and "step 300" in spike.message
    assert "optimizer 1" in spike.subject
    assert set(f) == {"GS403"}  # G's steps do not make D's parameters look stopped, etc.


def test_grads_not_reset_by_one_optimizer():
    (f,) = found(gan_run(gan(d_carried=True)))["GS412"]
    assert f.message.startswith("optimizer 0 (Adam")


def test_manual_updates_are_judged_like_an_optimizer():
    recs = [
        rec(s, 1.0, 1.0, optimizer=0, param_norms=(1.0, None))
        if s % 2
        else rec(s, 1.0, 1.0, optimizer=1, param_norms=(None, 1.0), carried_norm=0.3)
        for s in range(1, 101)
    ]
    (f,) = found(run_of(recs, GAN_PARAMS, ("SGD", MANUAL), ((0,), (1,))))["GS412"]
    assert f.message.startswith("manual update: ")


# -- clipping ------------------------------------------------------------------------------
def clipped_run(coef, n=200):
    """Clipping binds on every step with this clip coefficient (max_norm / norm)."""
    return [rec(s, 2.0 - s / n, 1.0 / coef, max_norm=1.0) for s in range(1, n + 1)]


def test_clipping_strength_sets_the_severity():
    assert step_clipping.clipping_binds(run_of(clipped_run(0.87)), T) == []  # nanoGPT stock
    assert step_clipping.clipping_binds(run_of(clipped_run(0.88)), T) == []  # word_language_model
    (info,) = step_clipping.clipping_binds(run_of(clipped_run(0.73), optimizers=("SGD",)), T)
    assert info.severity == Severity.INFO and "trims about 27%" in info.message
    (warn,) = step_clipping.clipping_binds(run_of(clipped_run(0.05), optimizers=("SGD",)), T)
    assert warn.severity == Severity.WARNING and "learning-rate limiter" in warn.message
    assert abs(warn.value - 0.05) < 1e-9


def test_light_clipping_under_an_adaptive_optimizer_trims_no_step():
    """nanoGPT compiled (AdamW, coefficient 0.73 at every step): AdamW's running scale is
    made of the clipped gradients, so no step is 27% shorter for it."""
    (info,) = step_clipping.clipping_binds(run_of(clipped_run(0.73)), T)
    assert info.severity == Severity.INFO and "trims" not in info.message
    assert "AdamW divides each step" in info.message and info.threshold == T.clip_coef_info


def test_heavy_clipping_under_an_adaptive_optimizer_is_info():
    """Adam divides by its running gradient scale: a clip that scales every step alike
    (minGPT: coefficient 0.22 on every step) does not set its step size."""
    for kind in ("AdamW", "Adam", "RMSprop", "Adagrad"):
        (f,) = step_clipping.clipping_binds(run_of(clipped_run(0.05), optimizers=(kind,)), T)
        assert f.severity == Severity.INFO and "learning-rate limiter" not in f.message
        assert f"{kind} divides each step" in f.message


def test_amp_clip_before_unscale():
    scale = 65536.0
    recs = [
        rec(s, 2.0 - s / 200, 1.17, max_norm=1.0, scale=scale, scaled_clip=True)
        for s in range(1, 201)
    ]
    f = found(run_of(recs))
    (err,) = f["GS416"]
    assert err.severity == Severity.ERROR
    assert "scaler.unscale_(optimizer)" in err.advice and "clip_grad_norm_" in err.advice
    assert any("6.55e+04" in e and "1.17" in e and "max_norm 1" in e for e in err.evidence)
    assert "GS406" not in f  # no "raise max_norm to 7.6e4"


def test_norm_spike_advice_fits_a_script_that_already_clips():
    recs = [rec(s, 2.0, 1.0 + 0.05 * math.sin(s), max_norm=1.0) for s in range(1, 201)]
    recs[149] = rec(150, 2.0, 30.0, max_norm=1.0)
    (f,) = found(run_of(recs))["GS403"]
    assert "already clips (max_norm 1)" in f.advice and "clip the gradient" not in f.advice
    recs = [rec(s, 2.0, r.grad_norm) for s, r in enumerate(recs, 1)]
    (f,) = found(run_of(recs))["GS403"]
    assert "clip the gradient norm" in f.advice


# -- a parameter that stops learning (GS417) ---------------------------------------------
PARAMS2 = (
    ParamInfo("body.w", (4, 4), True, True, 0.1),
    ParamInfo("head.w", (4, 4), False, True, 0.1),
)


def frozen_at(step, zeros=False, n=200):
    return [
        rec(s, 2.0 - s / n, 1.0, param_norms=(1.0, 1.0 if s < step else (0.0 if zeros else None)))
        for s in range(1, n + 1)
    ]


def test_frozen_midway_is_a_warning_naming_the_step():
    for zeros in (False, True):
        (f,) = found(run_of(frozen_at(120, zeros), PARAMS2))["GS417"]
        assert f.subject == "head.w" and f.severity == Severity.WARNING
        assert "stopped learning at step 120" in f.message and "step 119" in f.message
        assert "requires_grad" in f.advice


def test_intermittent_and_never_learning_params_are_not_stopped():
    moe = [
        rec(s, 2.0 - s / 200, 1.0, param_norms=(1.0, 1.0 if s % 3 == 0 else None))
        for s in range(1, 201)
    ]
    assert "GS417" not in found(run_of(moe, PARAMS2))
    near_end = frozen_at(190)  # stopped 11 steps before the end: too few to say
    assert "GS417" not in found(run_of(near_end, PARAMS2))
    never = [rec(s, 2.0 - s / 200, 1.0, param_norms=(1.0, None)) for s in range(1, 201)]
    assert "GS417" not in found(run_of(never, PARAMS2))


# -- GS401 ---------------------------------------------------------------------------------
def test_non_finite_says_which_and_where_to_look():
    recs = [rec(s, 1.0, 1.0) for s in range(1, 60)]
    recs[39] = rec(40, 1.0, math.inf, param_norms=(math.inf,))
    (f,) = found(run_of(recs))["GS401"]
    assert f.message.startswith("the gradients became non-finite") and "step 40" in f.message
    assert "gradscope inspect --script train.py --step 40 -- ARGS" in f.advice
    assert any("first parameters with non-finite gradient elements: w" in e for e in f.evidence)
    recs[39] = rec(40, math.nan, math.nan, param_norms=(math.nan,))
    (f,) = found(run_of(recs, label="my run"))["GS401"]
    assert f.message.startswith("the loss became non-finite")
    assert "gradscope inspect --script SCRIPT --step 40 -- ARGS" in f.advice  # not a script


def test_a_loss_that_stalls_near_its_start_is_info():
    """A high lr held back by clipping: 4.2 → 3.7 in 40 steps, then flat for 110."""
    rng = random.Random(5)
    recs = [
        rec(s, (3.7 + 0.5 * max(0.0, 1 - s / 40)) * math.exp(rng.gauss(0, 0.02)), 1.0)
        for s in range(1, 151)
    ]
    (f,) = found(run_of(recs))["GS415"]
    assert f.severity == Severity.INFO
    assert "fell only 9% (median 4.09 over its first steps" in f.message
    assert "has not improved since about step 76" in f.message


def test_a_gan_generator_loss_that_rises_early_is_not_a_blowup():
    """G's loss rises as D learns (0.7 → 2.5) with its norm: adversarial, by design."""
    recs = []
    for s in range(1, 301):
        d, k = s % 2 == 1, (s + 1) // 2
        loss = 0.69 if d else 0.7 + 1.8 * min(1.0, k / 10)
        norm = 1.0 if d else 0.2 + 1.0 * min(1.0, k / 10)
        recs.append(
            rec(
                s,
                loss,
                norm,
                optimizer=0 if d else 1,
                param_norms=(norm, None) if d else (None, norm),
            )
        )
    f = found(gan_run(recs))
    assert "GS414" not in f and "GS415" not in f


def test_trend_and_loss_spike_advice_fit_a_script_that_clips():
    recs = [
        rec(s, 2.0, 1.0 if s <= 100 else 1.05 ** (s - 100), max_norm=1.0) for s in range(1, 201)
    ]
    (f,) = found(run_of(recs))["GS404"]
    assert "clipping (max_norm 1) is on" in f.advice and "clip the gradient" not in f.advice
    scaled = [
        rec(r.step, r.loss, r.grad_norm, max_norm=1.0, scaled_clip=True, scale=8.0) for r in recs
    ]
    (f,) = found(run_of(scaled))["GS404"]
    assert "clip-before-unscale" in f.advice
    recs = [rec(s, 1.0 + 0.05 * math.sin(s), 1.0, max_norm=1.0) for s in range(1, 201)]
    recs[149] = rec(150, 10.0, 1.0, max_norm=1.0)
    (f,) = found(run_of(recs))["GS402"]
    assert f.advice.endswith("(clipping is already on)")
