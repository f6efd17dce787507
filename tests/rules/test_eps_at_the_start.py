"""GS442 where eps outweighs √v̂ at the first steps only (an RL agent's eps of 1e-3 on an
LSTM's tiny gradients at its initialisation, R2D2's setting): information once the last
two samples show the gradients grown past it; a warning where it still holds there."""

from __future__ import annotations

import dataclasses

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules.step_eps import adam_eps_dominates
from gradscope.steps.records import ParamInfo, WatchRun
from gradscope.steps.state_facts import EpsSample, StateFacts
from tests.watcher.watch_scripts import step_record


def run_of(shares: dict[int, float]) -> WatchRun:
    eps = tuple(EpsSample(0, step, 1e-3, ((0, share, 1000),)) for step, share in shares.items())
    steps = tuple(step_record(i) for i in range(1, 101))
    params = (ParamInfo("lstm.weight_hh_l0", (40, 10), True, True, 0.1),)
    return WatchRun(
        "t", params, steps, "completed", 1.0, optimizers=("Adam",), state_facts=StateFacts(eps=eps)
    )


def test_eps_that_held_the_first_steps_only_is_information():
    (found,) = adam_eps_dominates(
        run_of({1: 0.72, 2: 0.72, 3: 0.72, 25: 0.63, 50: 0.48, 75: 0.41, 100: 0.39}), Thresholds()
    )
    assert found.severity == Severity.INFO and found.steps == (1, 2)
    assert "by steps 75 and 100 it was above √v̂ for 41% and 39%" in found.message


def test_eps_that_still_holds_at_the_last_samples_or_a_short_run_warns():
    for shares in ({1: 0.9, 2: 0.9, 3: 0.9, 25: 0.4, 50: 0.6, 75: 0.7}, {1: 0.9, 2: 0.9, 3: 0.9}):
        (found,) = adam_eps_dominates(run_of(shares), Thresholds())
        assert found.severity == Severity.WARNING and "lower eps" in found.advice


def test_eps_that_held_the_first_steps_only_explains_nothing_after_them():
    """PPO under stable-baselines3 (Adam's eps 1e-5, 51% of the elements below it at steps
    1-2, 43% by step 100): its surrogate loss rising with the returns was told "a
    consequence of adam-eps-dominates: fix that first"."""
    from gradscope.findings import RULES
    from gradscope.rules import causes

    shares = {1: 0.72, 2: 0.72, 3: 0.72, 25: 0.63, 50: 0.48, 75: 0.41, 100: 0.39}
    run = run_of(shares)
    (passed,) = adam_eps_dominates(run, Thresholds())
    stall = RULES["GS415"].finding("loss", "no better than it started", "check the data")
    out = causes.link(run, [passed, stall])
    assert [f.explained_by for f in out if f.rule == "GS415"] == [None]
    (held,) = adam_eps_dominates(run_of({1: 0.9, 2: 0.9, 3: 0.9}), Thresholds())
    out = causes.link(run, [held, stall])
    assert [f.explained_by for f in out if f.rule == "GS415"] == [f"GS442:{held.subject}"]


def test_eps_that_held_every_sample_but_not_the_last_steps_is_information():
    """DreamerV3's actor under eps 1e-5: advantages near 0 while the reward head learns, every
    sample (the last at step 100) under eps, the gradient's RMS per element above it by the
    run's last steps; gradients that stay small, or were as large at the last sample (a
    measure of √v̂ that says eps holds), still warn."""
    shares = {1: 1.0, 2: 1.0, 3: 1.0, 25: 1.0, 50: 1.0, 75: 1.0, 100: 1.0}
    run = run_of(shares)  # 400 elements at eps 1e-3: an RMS of 1e-3 is a norm of 0.02
    grown = tuple(step_record(i, norm=0.01 if i <= 100 else 0.1) for i in range(1, 131))
    (found,) = adam_eps_dominates(dataclasses.replace(run, steps=grown), Thresholds())
    assert found.severity == Severity.INFO and "by step 130 the gradient's RMS" in found.message
    small = tuple(step_record(i, norm=0.01) for i in range(1, 131))
    for steps in (small, tuple(step_record(i, norm=0.1) for i in range(1, 131))):
        (found,) = adam_eps_dominates(dataclasses.replace(run, steps=steps), Thresholds())
        assert found.severity == Severity.WARNING
