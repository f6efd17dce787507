"""A critic trained on its own predictions from a replay buffer (skrl's and SB3's SAC): the
transitions an episode's end adds come back in a share of the batches after it, so the loss
spikes at the end and stays high on some batches for several steps while the others are back
at its level. That is a moving target's spike by design (information), where the model runs
without gradients at most iterations; with fixed targets, or where every batch after it
stays high (a blow-up), it still warns. Fabricated runs, no torch."""

from __future__ import annotations

import dataclasses
import math
import random

from gradscope.findings import Severity
from gradscope.rules.own_targets import own_predictions
from gradscope.steps.state_facts import StateFacts
from tests.rules.test_rules_objectives import MSE, found, rec, run_of

HIGH = (2, 3, 4)
"""Steps after an episode's end whose batches hold its transitions (the second is back)."""


def replayed(n=300, every=30, lifted_at=None):
    """A TD loss near 0.3 that jumps 2.6× at every `every`-th step (above the spike line,
    2× its median), then is 1.9× high again (under the line, above halfway back) at the
    HIGH steps after it, as a share of the batches replays those transitions; `lifted_at`:
    an episode end after which every batch of the next 8 stays that high (the model no
    longer fits the rest of its replay either)."""
    rng = random.Random(5)
    out = []
    for s in range(1, n + 1):
        loss = 0.3 * math.exp(rng.gauss(0, 0.005))
        if s % every == 0:
            loss *= 2.6
        elif s % every in HIGH:
            loss *= 1.9
        if lifted_at is not None and 0 < s - lifted_at <= 8:
            loss = 0.3 * 1.9
        out.append(rec(s, loss))
    return out


def _acting(run, seen):
    return dataclasses.replace(run, state_facts=StateFacts(no_grad_steps=seen))


def test_replayed_transitions_after_an_episode_end_are_a_moving_targets_spikes():
    run = run_of(replayed(), MSE)
    (fixed,) = found(run)["GS402"]  # the same losses with fixed targets: not back at once
    assert fixed.severity == Severity.WARNING
    (acting,) = found(_acting(run, len(run.steps)))["GS402"]
    assert acting.severity == Severity.INFO and acting.advice.startswith("not a fault by itself")


def test_a_jump_that_lifts_every_batch_after_it_still_warns_where_the_model_acts():
    (f,) = found(_acting(run_of(replayed(lifted_at=150), MSE), 300))["GS402"]
    assert f.severity == Severity.WARNING


def test_the_iterations_are_the_busiest_optimizers_steps():
    """SAC steps its critics, actor and temperature once per iteration around one action:
    an action per iteration is one at every iteration, not at a third of the steps."""
    three = [rec(3 * i + k + 1, 0.3, optimizer=k) for i in range(100) for k in range(3)]
    run = dataclasses.replace(run_of(three, MSE), optimizers=("Adam",) * 3)
    said = own_predictions(_acting(run, 100))
    assert said is not None and "at 100 of the 100 steps of its busiest optimizer" in said
    assert own_predictions(_acting(run, 30)) is None  # an evaluation every few iterations


def climbing(odd: tuple[int, ...], height: float, n=400):
    """A critic's TD loss that steps up 3× at steps 100, 200 and 300 as its values grow and
    holds each level (a climb: its first steps are jumps the rolling median lags), with
    batches `height`× the level at the `odd` steps, back at the next."""
    rng = random.Random(1)
    out, level = [], 0.3
    for s in range(1, n + 1):
        level *= 3.0 if s in (100, 200, 300) else 1.0
        out.append(rec(s, level * math.exp(rng.gauss(0, 0.05)) * (height if s in odd else 1)))
    return out


def test_spikes_among_a_climbs_jumps_count_them_toward_the_pattern():
    """The climb's jumps are left out as spikes where the model acts (its level says nothing
    alone), but they are the same moving target's: two spikes among them make a pattern."""
    run = _acting(run_of(climbing((150, 250, 350), 2.0), MSE), 400)
    (f,) = found(run)["GS402"]
    assert f.severity == Severity.INFO and "more were steps of a climb" in f.evidence[-1]
    (fixed,) = found(run_of(climbing((150, 250, 350), 2.0), MSE))["GS402"]
    assert fixed.severity == Severity.WARNING  # fixed targets: the climb itself warns


def test_a_spike_far_above_a_climbs_jumps_still_warns():
    (f,) = found(_acting(run_of(climbing((150,), 4.0), MSE), 400))["GS402"]
    assert f.severity == Severity.WARNING and f.steps == (150,)
