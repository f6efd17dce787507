"""GS478: a cross-entropy far above the loss of a uniform guess from its first step, before
any update: the untrained forward blows the logits up (S4D's kernel with A's real part
positive grows as exp(dt·t) along the sequence). A warning when the run never comes down
to twice the guess, information when it does; silent for a loss that starts at the guess
and rises (a learning rate too high) and for a start a few times the guess."""

from __future__ import annotations

import math

from watch_scripts import domain_watched, step_record

import gradscope as gs
from gradscope.findings import Severity
from gradscope.rules import watch as rules
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import ParamInfo, WatchRun

CHANCE = math.log(4)


def _all(losses: list[float]) -> list:
    records = tuple(
        step_record(s, 1.0 if math.isfinite(v) else v, v, lrs=(1e-3,))
        for s, v in enumerate(losses, start=1)
    )
    kind = LossKind((LossTerm("cross_entropy", "mean", 1.0, classes=4),))
    params = (ParamInfo("w", (4, 4), True, True, 0.1),)
    run = WatchRun("script train.py", params, records, "completed", 1.0, loss_kinds=(kind,))
    return rules.diagnose(run, gs.config.Thresholds())


def _judged(losses: list[float]) -> list:
    return [f for f in _all(losses) if f.rule == "GS478"]


def test_an_s4d_kernel_without_the_minus_is_named_at_its_first_step():
    report = domain_watched("s4d_kernel.py", "noexp")
    (f,) = [f for f in report.findings if f.rule == "GS478"]
    assert f.severity == Severity.INFO and f.steps == (1,)
    assert "before any update" in f.message and "decay has the wrong sign" in f.message
    assert "A = -exp(log_A_real)" in f.advice


def test_the_s4d_recipe_is_silent():
    report = domain_watched("s4d_kernel.py", "healthy")
    assert [f.rule for f in report.findings if f.severity > Severity.INFO] == []
    assert "GS478" not in [f.rule for f in report.findings]


def test_a_loss_that_never_comes_down_to_twice_the_guess_is_the_warning():
    (f,) = _judged([300.0] + [8.0 - i / 100 for i in range(59)])
    assert f.severity == Severity.WARNING and "at every one of 60 steps" in f.message
    (short,) = _judged([8.0] * 60)  # not ten times the guess at first: still every step
    assert short.severity == Severity.WARNING


def test_a_start_at_the_guess_a_short_run_or_a_mild_start_is_silent():
    assert _judged([CHANCE * (1 + 2 * min(i, 20) / 20) for i in range(60)]) == []
    assert _judged([8.0] * 30) == []  # too few steps to call it steady
    assert _judged([5.0, 3.0] + [1.0] * 58) == []  # a hot init that falls below the guess


def test_a_loss_non_finite_at_the_first_step_names_the_forward_too():
    """Mamba's dt used raw (no softplus): exp(dt·A) overflows along the sequence in the
    untrained forward, so step 1's loss is NaN before any update."""
    nan = float("nan")
    (f,) = [f for f in _all([nan] * 12) if f.rule == "GS401"]
    assert "not the learning rate" in f.advice and "dt not through softplus" in f.advice
