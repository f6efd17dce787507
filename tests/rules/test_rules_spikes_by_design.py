"""Gradient-norm spikes by design, on fabricated runs (no torch): GS403 where each spike
comes with the loss's own spikes of a moving regression target, and a GAN's discriminator
whose norm rises and falls in turns as the generator moves (turns that follow each other
without the norm falling under the spike line); a corrupted batch among them, one far above
the others, a loss that spiked with the gradient, or a NaN after them still warn."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun
from tests.rules.test_rules_objectives import MSE, rec, run_of
from tests.watcher.watch_scripts import step_record

T = Thresholds()
BCE = LossKind((LossTerm("bce", "mean", 1.0),))


def _found(run) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in rules.diagnose(run, T):
        out.setdefault(f.rule, []).append(f)
    return out


# -- a moving regression target: the norm spikes with the loss --------------------------
def episode_ends(n=310, every=25, height=30.0, odd=None, extra=None):
    """An A2C-like loss near 2 and gradient norm near 1 that both jump at every `every`-th
    step (the loss `height`×, the norm √height×) and come back at the next; `odd`: a step
    whose loss and norm are 1e5× (a corrupted batch); `extra`: a step whose norm alone jumps."""
    rng = random.Random(3)
    out = []
    for s in range(1, n + 1):
        loss, norm = 2.0 * math.exp(rng.gauss(0, 0.1)), math.exp(rng.gauss(0, 0.1))
        if s % every == 0:
            loss, norm = loss * height, norm * math.sqrt(height)
        if s == odd:
            loss, norm = loss * 1e5, norm * 1e5
        if s == extra:
            norm *= 20
        out.append(rec(s, loss, norm=norm))
    return out


def test_norm_spikes_at_the_loss_spikes_of_a_moving_target_are_information():
    for height in (30.0, 400.0):
        found = _found(run_of(episode_ends(height=height), MSE))
        (f,) = found["GS403"]
        assert f.severity == Severity.INFO and "spiked at 12 step(s)" in f.message, height
        assert "each of its 12 spike(s) came at a step whose loss spiked by design" in str(
            f.evidence
        )
        assert f.advice.startswith("not a fault by itself") and "episode ends" in f.advice
        assert found["GS402"][0].severity == Severity.INFO


def test_a_norm_spike_the_loss_does_not_explain_still_warns():
    (f,) = _found(run_of(episode_ends(extra=163), MSE))["GS403"]
    assert f.severity == Severity.WARNING and 163 in f.steps


def test_one_corrupted_batch_among_the_episode_ends_still_warns():
    found = _found(run_of(episode_ends(odd=163), MSE))
    for rule in ("GS402", "GS403"):
        (f,) = found[rule]
        assert f.severity == Severity.WARNING and "step 163 reached" in f.message, rule
        # named apart from the pattern: that batch, not the episode ends
        assert f.steps == (163,) and f.advice.startswith("look at the batch of step 163"), rule
        assert "step 163 stands far above the loss's other 12 spikes" in f.evidence[-1], rule


def test_two_corrupted_batches_among_the_episode_ends_are_both_named():
    recs = episode_ends(odd=163)
    recs[201] = rec(202, 2e5, norm=1e5)
    (f,) = _found(run_of(recs, MSE))["GS402"]
    assert f.severity == Severity.WARNING and set(f.steps) == {163, 202}


# -- a game: the discriminator's turns ----------------------------------------------------
D, G = (
    ParamInfo("D.0.weight", (8, 8), True, True, 1.0),
    ParamInfo("G.0.weight", (8, 8), True, True, 1.0),
)


def game(d_norms: dict[int, float], d_losses: dict[int, float] | None = None, n=150):
    """D steps (odd, optimizer 0) and G steps (even, optimizer 1) alternating; D's norm near
    10 but for `d_norms` (by D's own step index), its loss near 0.5 but for `d_losses`."""
    rng = random.Random(5)
    recs = []
    for k in range(n):
        norm = d_norms.get(k, 10 * math.exp(rng.gauss(0, 0.08)))
        loss = (d_losses or {}).get(k, 0.5 * math.exp(rng.gauss(0, 0.08)))
        recs.append(step_record(2 * k + 1, norm=norm, loss=loss, param_norms=(norm, None)))
        g = 15 * math.exp(rng.gauss(0, 0.08))
        recs.append(step_record(2 * k + 2, norm=g, loss=2.0, optimizer=1, param_norms=(None, g)))
    return _gan(recs)


def _gan(recs: list) -> WatchRun:
    return WatchRun(
        "script dcgan.py",
        (D, G),
        tuple(recs),
        "completed",
        1.0,
        optimizers=("Adam", "Adam"),
        members=((0,), (1,)),
        loss_kinds=(BCE, BCE),
    )


TURNS = {60: 40, 61: 70, 62: 90, 63: 38, 64: 32, 65: 55, 90: 45, 91: 30, 120: 60}
"""Four turns; the first two follow each other in six consecutive spiking steps (D's norm
fell halfway back from 90 to 38 and rose again before it fell under the spike line)."""


def test_turns_that_follow_each_other_without_falling_under_the_spike_line_are_a_game():
    (f,) = _found(game(TURNS))["GS403"]
    assert f.severity == Severity.INFO and "optimizer 0" in f.subject
    assert "4 turn(s) of its gradient norm" in str(f.evidence)
    assert "its loss did not spike with its gradient" in str(f.evidence)


def test_a_single_turn_with_a_quiet_loss_is_a_game():
    (f,) = _found(game({90: 45, 91: 30}))["GS403"]
    assert f.severity == Severity.INFO and "1 turn(s)" in str(f.evidence)


SHORT = {40: 50, 90: 45, 91: 30, 120: 60}
"""Three turns, each over in two steps."""


def test_a_discriminator_spike_its_loss_shares_still_warns():
    """A batch whose loss is scaled by mistake spikes the loss with the gradient."""
    assert _found(game(SHORT))["GS403"][0].severity == Severity.INFO
    found = _found(game({**SHORT, 100: 400}, {100: 500.0}))
    assert found["GS403"][0].severity == Severity.WARNING
    assert found["GS402"][0].severity == Severity.WARNING


def test_a_turn_far_above_the_others_still_warns():
    (f,) = _found(game({**SHORT, 100: 5e5}))["GS403"]
    assert f.severity == Severity.WARNING and "step 201 reached 5.00e+05" in f.message


def test_a_turn_that_never_comes_back_still_warns():
    up = {k: 80.0 for k in range(100, 150)}
    (f,) = _found(game({**TURNS, **up}))["GS403"]
    assert f.severity == Severity.WARNING


DCGAN = json.loads(Path(__file__).with_name("dcgan_two_epochs.json").read_text())
"""The pytorch/examples DCGAN over two epochs (tests/watcher/test_watch_spikes_by_design.py,
seed 1) as an AVX-512 machine ran it on one thread and on two: (step, optimizer, gradient
norm, loss) of D's steps (optimizer 0) and G's."""


def _dcgan(rows: list) -> list:
    return [
        step_record(s, norm=n, loss=loss, optimizer=o, param_norms=(None, n) if o else (n, None))
        for s, o, n, loss in rows
    ]


def test_a_turn_cut_short_by_the_next_one_came_back_if_it_fell_halfway_first():
    """One thread: D's norm rises in 7 turns from step 125 on; the turn at 157-159 (38, 45)
    falls to 17 two steps on, and G moves again (62, 90, 117 at 167-171) before five quiet
    steps could follow it."""
    recs = _dcgan(DCGAN["one thread"])
    (f,) = _found(_gan(recs))["GS403"]
    assert f.severity == Severity.INFO and "7 turn(s) of its gradient norm" in str(f.evidence)
    held = [r if r.step not in (161, 163, 165) else replace(r, grad_norm=30.0) for r in recs]
    assert _found(_gan(held))["GS403"][0].severity == Severity.WARNING  # not halfway back


def test_a_turn_the_spike_line_cut_in_two_is_one_turn():
    """Two threads: D's norm at 73, 86, 66, 80 over steps 181-187, the 66 just under the
    spike line: one turn of four steps, which falls back after 187."""
    (f,) = _found(_gan(_dcgan(DCGAN["two threads"])))["GS403"]
    assert f.severity == Severity.INFO and "5 turn(s) of its gradient norm" in str(f.evidence)


LOSS_TURNS = {60: 0.5 * 5, 90: 0.5 * 4, 120: 0.5 * 6}
"""D's loss spiking with its gradient at three of the four turns (the generator's move
fooled it), each back at the next step."""


def test_a_loss_that_spiked_with_the_turns_and_came_back_is_the_game():
    (f,) = _found(game(TURNS, LOSS_TURNS))["GS403"]
    assert f.severity == Severity.INFO
    assert "its loss spiked with its gradient at 3 step(s) and came back" in str(f.evidence)
    stayed = {**LOSS_TURNS, **{k: 3.0 for k in range(121, 130)}}  # a collapse, not a turn
    assert _found(game(TURNS, stayed))["GS403"][0].severity == Severity.WARNING
