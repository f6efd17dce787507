"""Verdicts an objective can support, on fabricated runs (no torch): a trend verdict (GS414,
GS415, GS419) only for one recognised loss kind with the run's own evidence that it did not
learn; value-target spikes that recur and recover (GS402) are information; a parameter
outside every optimizer (GS411) is an error only when it gets gradients, with advice that
fits a target network.

Numbers mimic measured runs: CleanRL's PPO loss (21.5 → 31.9 while the return rose), a DQN
TD loss read as an MSE (1.04 → 2.97), an A2C loss that jumps to hundreds of times its median
at episode ends and comes back."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import GroupSettings, LossKind, LossTerm, OptimizerSettings
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

T = Thresholds()
W = ParamInfo("net.0.weight", (8, 8), True, True, 1e-3)
CE = LossKind((LossTerm("cross_entropy", "mean", 1.0, classes=10),))
MSE = LossKind((LossTerm("mse", "mean", 1.0),))
CUSTOM = LossKind((), unknown_terms=3)
MIXED = LossKind((LossTerm("mse", "mean", 0.5), LossTerm("cross_entropy", "mean", 1.0, classes=4)))


def rec(step, loss, norm=1.0, **kw):
    return step_record(step, norm=norm, loss=loss, **{"lrs": (1e-3,), **kw})


def run_of(records, kind, params=(W,), members=(), settings=()):
    return WatchRun(
        "script train.py",
        tuple(params),
        tuple(records),
        "completed",
        1.0,
        optimizers=("Adam",),
        members=members,
        loss_kinds=(kind,),
        settings=settings,
    )


def found(run) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in rules.diagnose(run, T):
        out.setdefault(f.rule, []).append(f)
    return out


def flat(level, n=200, noise=0.05, seed=0, **kw):
    rng = random.Random(seed)
    return [rec(s, level * math.exp(rng.gauss(0, noise)), **kw) for s in range(1, n + 1)]


def rising(start, end, n=300, seed=1, **kw):
    rng = random.Random(seed)
    return [
        rec(s, (start + (end - start) * s / n) * math.exp(rng.gauss(0, 0.1)), **kw)
        for s in range(1, n + 1)
    ]


# -- GS415: facts before judgments -----------------------------------------------------
def test_no_progress_warns_with_the_evidence_it_rests_on():
    """Targets shuffled apart from their inputs: a cross-entropy flat at ln 10."""
    (f,) = found(run_of(flat(math.log(10)), CE))["GS415"]
    assert f.severity == Severity.WARNING and "uniform guess over 10 classes" in f.message
    assert any(e.startswith("what says it did not learn: the loss sits at") for e in f.evidence)


def test_the_same_flat_loss_of_an_unknown_or_multi_term_objective_is_information():
    for kind, why in (
        (CUSTOM, "kind is unknown"),
        (LossKind(MSE.terms, unknown_terms=1), "has terms gradscope did not recognise"),
        (LossKind(()), "kind is unknown"),
        (None, "kind is unknown"),
        (MIXED, "sums several objectives"),
    ):
        (f,) = found(run_of(flat(math.log(10)), kind))["GS415"]
        assert f.severity == Severity.INFO, kind
        assert f.advice.startswith("not judged: ") and why in f.advice, kind
        assert "no better than where it started" in f.message  # the facts stay


def test_a_ppo_loss_that_rises_while_the_agent_learns_is_information():
    (f,) = found(run_of(rising(21.5, 31.9), CUSTOM))["GS415"]
    assert f.severity == Severity.INFO and "RL objective" in f.advice
    assert "median loss" in f.evidence[0]


def test_a_td_loss_read_as_mse_needs_evidence_beyond_its_rise():
    """A known kind whose level rose, but nothing else says the model did not learn."""
    ratios = {"update_ratios": (1e-3,)}
    (f,) = found(run_of(rising(1.04, 2.97, **ratios), MSE))["GS415"]
    assert f.severity == Severity.INFO and "nothing else in the run says" in f.advice
    assert not any(e.startswith("what says") for e in f.evidence)


def test_update_ratios_far_too_small_corroborate():
    (f,) = found(run_of(flat(0.8, update_ratios=(1e-7,)), MSE))["GS415"]
    assert f.severity == Severity.WARNING
    assert any("median update/weight ratio is 1e-07" in e for e in f.evidence)
    # at a healthy ratio the same flat MSE is only information
    (f,) = found(run_of(flat(0.8, update_ratios=(1e-3,)), MSE))["GS415"]
    assert f.severity == Severity.INFO


def test_step_updating_a_copy_corroborates():
    """The optimizer steps a copy the loss never uses: none of its parameters gets a
    gradient, while the model the loss uses does (and is in no optimizer)."""
    copy = ParamInfo("copy.0.weight", (8, 8), True, True, 1e-3)
    model = ParamInfo("net.0.weight", (8, 8), True, False, None)
    recs = flat(0.8, param_norms=(None, 1.0))
    f = found(run_of(recs, MSE, params=(copy, model), members=((0,),)))
    (p,) = f["GS415"]
    assert p.severity == Severity.WARNING
    assert any(
        "none of the 1 parameters the optimizer steps got a gradient" in e for e in p.evidence
    )


def test_gradients_that_die_corroborate():
    """Dead from step 50 under mini-batches (the loss moves with each batch), and under one
    full batch (the loss moved while they lived, then stands still above where it began:
    saturated units, no minimum reached)."""
    rng = random.Random(3)
    batches = [0.8 * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(200)]
    full = [0.8 - 0.001 * s if s < 50 else 0.9 for s in range(1, 201)]
    for losses in (batches, full):
        recs = [
            rec(s, v, 1.0 if s < 50 else 1e-7, param_norms=(1.0 if s < 50 else 1e-7,))
            for s, v in enumerate(losses, start=1)
        ]
        (f,) = found(run_of(recs, MSE))["GS415"]
        assert f.severity == Severity.WARNING
        assert any("gradient norm of net.0 fell" in e for e in f.evidence)


def test_a_stall_of_an_unknown_objective_says_nothing():
    """4.2 → 3.7 in 40 steps, then flat: information for a cross-entropy, nothing for RL."""
    rng = random.Random(5)
    recs = [
        rec(s, (3.7 + 0.5 * max(0.0, 1 - s / 40)) * math.exp(rng.gauss(0, 0.02)))
        for s in range(1, 151)
    ]
    assert found(run_of(recs, CE))["GS415"][0].severity == Severity.INFO
    assert "GS415" not in found(run_of(recs, CUSTOM))


# -- GS414 / GS419: the other trend verdicts -------------------------------------------
def blown_up(n=120):
    climb = [4.3, 5.9, 8.4, 11.0, 14.2, 17.5, 19.3, 15.0, 9.0, 6.0]
    return [
        rec(s, climb[s - 1] if s <= len(climb) else 6.0, 20.0 if s <= 10 else 0.3)
        for s in range(1, n + 1)
    ]


def test_an_early_rise_of_an_unknown_objective_is_information():
    (known,) = found(run_of(blown_up(), CE))["GS414"]
    assert known.severity == Severity.ERROR
    (custom,) = found(run_of(blown_up(), CUSTOM))["GS414"]
    assert custom.severity == Severity.INFO and custom.advice.startswith("not judged")
    assert custom.message == known.message


def test_lr_too_high_reads_the_loss_only_for_a_recognised_objective():
    """Update ratios of 0.05 in the first steps (large, not rewriting the weights) and a
    loss that did not fall: harm for a cross-entropy at chance, no sign for RL."""
    adam = ((OptimizerSettings("Adam", 1, (GroupSettings(1e-3, betas=(0.9, 0.999)),), "adam"),),)
    recs = flat(math.log(10), update_ratios=(0.05,))
    (f,) = found(run_of(recs, CE, settings=adam))["GS419"]
    assert f.severity == Severity.WARNING
    assert "GS419" not in found(run_of(recs, CUSTOM, settings=adam))


# -- GS402: spikes by design -----------------------------------------------------------
def spiky(n=310, every=25, height=500.0, stay=0, nan_at=None):
    """An A2C-like loss near 2 that jumps `height`× at every `every`-th step (episode ends)
    and comes back at the next step (or stays up `stay` steps after the last jump)."""
    rng = random.Random(7)
    out = []
    last = (n // every) * every
    for s in range(1, n + 1):
        loss = 2.0 * math.exp(rng.gauss(0, 0.1))
        if s % every == 0 or (stay and last < s <= last + stay):
            loss *= height
        if nan_at is not None and s == nan_at:
            loss = math.nan
        out.append(rec(s, loss))
    return out


def test_value_target_spikes_that_recur_and_recover_are_information():
    for kind in (MSE, CUSTOM, None, LossKind((LossTerm("smooth_l1", "mean", 1.0),))):
        (f,) = found(run_of(spiky(), kind))["GS402"]
        assert f.severity == Severity.INFO, kind
        assert "spiked at 12 step(s)" in f.message
        assert any("each of the 12 spikes lasted at most 5 steps" in e for e in f.evidence)
        assert f.advice.startswith("not a fault by itself")


def test_spikes_stay_warnings_where_they_are_not_by_design():
    # a classifier's loss has no moving targets
    assert found(run_of(spiky(), CE))["GS402"][0].severity == Severity.WARNING
    # one corrupted batch
    once = [*spiky(every=1000, n=300), rec(301, 1000.0), rec(302, 2.0)]
    (one,) = found(run_of(once, MSE))["GS402"]
    assert one.severity == Severity.WARNING
    # the last jump never came back: up from step 325 to the end at 345
    (stuck,) = found(run_of(spiky(n=345, stay=20), MSE))["GS402"]
    assert stuck.severity == Severity.WARNING and stuck.steps[-1] == 345
    # two that came back and one at the very last step: too few seen to call a pattern
    (few,) = found(run_of(spiky(n=75), MSE))["GS402"]
    assert few.severity == Severity.WARNING


def test_a_recurring_spike_the_run_ends_on_is_not_held_against_the_pattern():
    (f,) = found(run_of(spiky(n=300), MSE))["GS402"]
    assert f.severity == Severity.INFO
    assert "the last, at step 300, ended the run before it could be seen" in f.evidence[1]
    # a spike followed by a non-finite loss
    f = found(run_of(spiky(nan_at=290), MSE))
    assert f["GS402"][0].severity == Severity.WARNING and "GS401" in f


# -- GS411: parameters that change outside any optimizer -------------------------------
ONLINE = (ParamInfo("q_net.0.weight", (8, 4), True, True, 1e-3),)
TARGET = ParamInfo("q_net_target.0.weight", (8, 4), True, False, None)
ADAPTER = ParamInfo("adapter.weight", (4, 4), True, False, None)


def test_a_copy_that_gets_no_gradient_is_information_stating_the_facts():
    recs = [rec(s, 1.0, param_norms=(1.0, None)) for s in range(1, 60)]
    (f,) = found(run_of(recs, MSE, params=(*ONLINE, TARGET), members=((0,),)))["GS411"]
    assert f.severity == Severity.INFO and "got no gradient in any step" in f.message
    assert (
        "never updated" not in f.message
        and "whether its values changed is not recorded" in f.message
    )


@pytest.mark.parametrize(
    ("first", "last", "says", "advice"),
    [
        (4.57, 4.77, "its values changed (norm 4.57 at the first step, 4.77 at the end)", "no"),
        (4.57, 4.57 * (1 + 1e-4), "updated by copy (a target, EMA or teacher): fine", "no"),
        (4.57, 4.57, "its values never changed", "freeze it"),
        (0.0, 0.0, "its values never changed", "freeze it"),
    ],
)
def test_a_copy_outside_the_optimizer_is_told_by_whether_its_values_changed(
    first, last, says, advice
):
    target = replace(TARGET, weight_norm=first, last_norm=last)
    recs = [rec(s, 1.0, param_norms=(1.0, None)) for s in range(1, 60)]
    (f,) = found(run_of(recs, MSE, params=(*ONLINE, target), members=((0,),)))["GS411"]
    assert f.severity == Severity.INFO and says in f.message and advice in f.advice


def test_a_target_network_that_gets_gradients_is_an_error_whose_advice_keeps_it_out():
    recs = [rec(s, 1.0, param_norms=(1.0, 0.1 * s)) for s in range(1, 60)]
    (f,) = found(run_of(recs, MSE, params=(*ONLINE, TARGET), members=((0,),)))["GS411"]
    assert f.severity == Severity.ERROR and "gets gradients" in f.message
    assert "copy of q_net.0.weight" in f.advice and "torch.no_grad()" in f.advice
    assert "pass model.parameters()" not in f.advice
    assert "no optimizer's zero_grad() clears its .grad" in f.message
    assert "grew from 0.1 at step 1 to 5.9 at step 59 (59×)" in f.evidence[1]


def test_a_layer_added_after_the_optimizer_gets_both_mechanisms_in_its_advice():
    recs = [rec(s, 1.0, param_norms=(1.0, 0.5 + 0.01 * (s % 3))) for s in range(1, 60)]
    (f,) = found(run_of(recs, MSE, params=(*ONLINE, ADAPTER), members=((0,),)))["GS411"]
    assert f.severity == Severity.ERROR
    assert "if it is a target, EMA or teacher copy" in f.advice
    assert "only otherwise pass model.parameters()" in f.advice
    assert len(f.evidence) == 1  # a norm that does not grow: something zeroes it
    # the same norm at every step is one stale gradient (an input's), no layer's
    stale = [rec(s, 1.0, param_norms=(1.0, 0.5)) for s in range(1, 60)]
    assert "GS411" not in found(run_of(stale, MSE, params=(*ONLINE, ADAPTER), members=((0,),)))
