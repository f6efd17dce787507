"""Spikes of a loss that sums terms of both signs near 0 (recurrent PPO: a clipped policy
term, half a value MSE, an entropy bonus), on fabricated runs (no torch): its rolling median
is a difference near 0 and each rollout moves its level (a rollout of 16 steps whose value
term jumps, for the whole rollout), so its recurring spikes are information (GS402). A
corrupted batch far above them, a single spike, a spike the gradient norm shared, a NaN, or
a loss of one kind that never crosses 0 still warn."""

from __future__ import annotations

import math
import random

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from tests.rules.test_rules_objectives import MSE, rec, run_of

T = Thresholds()
PPO = LossKind((LossTerm("mse", "mean", 0.5),), unknown_terms=2)


def _spike(records, kind=PPO):
    out = [f for f in rules.diagnose(run_of(records, kind), T) if f.rule == "GS402"]
    assert len(out) <= 1
    return out[0] if out else None


def rollouts(n=320, odd=None, norm_at=None, nan_at=None, shift=0.0, jumps=(9, 12, 15)):
    """A loss near 0 of both signs (sigma 0.006) in rollouts of 16 steps: in those of `jumps`
    a few steps jump 0.04-0.1 and come back, and the rollout from step 257 on sits 0.05
    higher throughout (its returns were new to the value term); `odd`: a step 500 higher (a
    reward scaled by mistake); `norm_at`: a step whose norm jumps 50× with its loss;
    `nan_at`: a NaN loss; `shift`: added to every loss (a loss that never crosses 0)."""
    rng = random.Random(11)
    out = []
    for s in range(1, n + 1):
        loss, norm = rng.gauss(0, 0.006) + shift, math.exp(rng.gauss(0, 0.2))
        if (s - 1) // 16 in jumps and rng.random() < 0.3:
            loss += rng.uniform(0.04, 0.1)
        if 257 <= s < 273:
            loss += 0.05
        if s == odd:
            loss += 500.0
        if s == norm_at:
            loss, norm = loss + 0.08, norm * 50
        out.append(rec(s, float("nan") if s == nan_at else loss, norm=norm))
    return out


def test_recurring_spikes_of_a_signed_sum_near_0_are_information():
    f = _spike(rollouts())
    assert f is not None and f.severity == Severity.INFO, f
    assert "sums several terms and takes both signs" in f.evidence[-1]
    assert f.advice.startswith("not a fault by itself")


def test_a_corrupted_batch_among_them_still_warns():
    f = _spike(rollouts(odd=180))
    assert f is not None and f.severity == Severity.WARNING and "step 180 reached" in f.message


def test_a_single_spike_of_a_signed_sum_still_warns():
    f = _spike(rollouts(jumps=(), odd=180))
    assert f is not None and f.severity == Severity.WARNING


def test_a_spike_the_gradient_norm_shared_still_warns():
    f = _spike(rollouts(norm_at=200))
    assert f is not None and f.severity == Severity.WARNING


def test_a_nan_after_them_still_warns():
    f = _spike(rollouts(nan_at=310))
    assert f is not None and f.severity == Severity.WARNING


def test_a_loss_of_one_term_or_one_sign_still_warns():
    for kind, shift in ((MSE, 0.0), (PPO, 0.03)):
        f = _spike(rollouts(shift=shift), kind)
        assert f is not None and f.severity == Severity.WARNING, (kind, shift)
