"""Opacus (differential privacy) under `watch`: its DPOptimizer keeps the clipped
per-sample gradients in a buffer of its own across the zero_grad() between physical
batches (BatchMemoryManager), skips its step until a logical batch is complete, then
writes `.grad` from that buffer just before the inner optimizer's step. Those resets wipe
nothing (no GS435), and the step's loss is its physical batches' mean, not their sum (no
blow-up read into the sum of 4 means, GS414). Expanded Weights' per-parameter wrapper is
read past, not tripped on. The same reset inside a plain accumulation, bare or under a
wrapper that passes `.grad` through, is still the bug."""

from __future__ import annotations

import functools
import math
import os

import pytest

from gradscope.findings import Severity

pytest.importorskip("opacus")

SCRIPT = os.path.join(os.path.dirname(__file__), "dp_scripts", "opacus_train.py")


@functools.cache
def _watched(case: str):
    from gradscope.watcher import watch_script

    return watch_script(SCRIPT, [case])


def _alarms(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING]


def test_opacus_physical_batches_are_no_wiped_accumulation():
    report = _watched("bmm")
    assert report.internal_error() is None
    assert len(report.run.steps) == 8  # logical batches only: the skipped steps apply nothing
    assert _alarms(report) == [], report.findings
    losses = [s.loss for s in report.run.steps]
    assert all(0.5 < loss < 1.5 for loss in losses), losses  # means, step 1 like the rest


def test_expanded_weights_are_watched_not_tripped_on():
    report = _watched("ew")
    assert report.internal_error() is None, report.internal_error()
    assert len(report.run.steps) == 8
    assert _alarms(report) == [], report.findings


@pytest.mark.parametrize("case", ["plain", "passthru"])
def test_a_reset_inside_a_plain_accumulation_is_still_wiped(case):
    report = _watched(case)
    (f,) = [f for f in report.findings if f.rule == "GS435"]
    assert f.severity == Severity.ERROR, f
    assert "the first 3 of 4 micro-batches were wiped" in f.message


def test_dp_sgd_at_a_usual_lr_is_silent():
    assert _alarms(_watched("sgd")) == []


def test_an_lr_too_high_under_dp_noise_is_named_with_the_noise():
    report = _watched("sgd_high")
    (f,) = [f for f in report.findings if f.rule == "GS419"]
    assert f.severity == Severity.WARNING, f
    assert "adds noise of std 0.025 to each gradient element" in f.advice  # 0.8 × 1 / 32
    assert "grow the expected batch" in f.advice


def test_an_empty_poisson_batch_is_no_non_finite_step():
    report = _watched("empty")
    assert any(math.isnan(s.loss) for s in report.run.steps if s.loss is not None)
    assert all(math.isfinite(s.grad_norm) for s in report.run.steps)
    assert _alarms(report) == [], report.findings


def test_a_nan_sample_under_dp_is_still_a_non_finite_step():
    (f,) = [f for f in _watched("nan").findings if f.rule == "GS401"]
    assert f.severity == Severity.ERROR, f


def test_ghost_clipping_steps_read_the_loss_not_its_reweighted_pass():
    report = _watched("ghost")
    assert _alarms(report) == [], report.findings
    # step 1 still sums both passes: a written .grad is told from the second step on
    losses = [s.loss for s in report.run.steps[1:]]
    assert all(0.5 < loss < 1.5 for loss in losses), losses
