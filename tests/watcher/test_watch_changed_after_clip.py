"""The gradient changed between the clip and the step (GS424): noise added after
clip_grad_norm_ with a sigma that grows was caught at the blow-up and named lr-too-high ("lower the
lr 106×"). Under SGD the update is bounded by lr × max_norm / (1 - momentum) whatever was
clipped; an update above it applied a gradient the clip never saw. The look-alikes stay
silent: noise that decays (within the bound), a step that did not clip (its gradient of any
size is in the buffer), weight decay (its share needs the weights), Adam (its update does not
tell the gradient's size); and an update above the bound in a loss that did not diverge is
information."""

from __future__ import annotations

import pytest
from test_watch_rules_series import found, rec
from test_watch_rules_series import run_of as series_run

from gradscope.findings import Severity
from gradscope.steps.meaning import GroupSettings, OptimizerSettings
from tests.watcher.watch_scripts import domain_watched

SGD = OptimizerSettings("SGD", 1, (GroupSettings(0.05, momentum=0.9),), "torch")


def _loud(report) -> list:
    return [f for f in report.findings if f.severity >= Severity.WARNING and not f.explained_by]


@pytest.fixture(scope="module")
def growing():
    return domain_watched("clip_noise.py", "growing")


def test_noise_growing_after_the_clip_is_named_not_the_lr(growing):
    (f,) = _loud(growing)
    assert f.rule == "GS424" and f.severity == Severity.ERROR, growing.findings
    assert "changed between the clip and the step" in f.message and f.steps == (1,)
    assert "lr is not the cause" in f.advice
    assert "GS419" not in {g.rule for g in growing.findings}


def test_noise_that_decays_after_the_clip_is_silent():
    report = domain_watched("clip_noise.py", "decaying")
    assert _loud(report) == [], report.findings
    assert "GS424" not in {f.rule for f in report.findings}


def _run(update=2.0, losses=None, settings=SGD, clip_every=1, n=40):
    records = []
    for i in range(1, n + 1):
        loss = (losses or (lambda k: 1.0 / k))(i)
        clip = i % clip_every == 0
        extra = dict(max_norm=1.0, clip_total=1.5, norm_type=2.0) if clip else {}
        records.append(rec(i, loss, 1.5, update_norm=update, lrs=(0.05,), **extra))
    run = series_run(records, optimizers=("SGD",), kind=None)
    return run.__class__(**{**run.__dict__, "settings": ((settings,),)})


def test_an_update_above_the_bound_is_an_error_only_where_the_loss_diverged():
    # lr 0.05 × max_norm 1 / (1 - 0.9) = 0.5: an update of 2 is 4× what the clip allows
    (bad,) = found(_run(losses=lambda k: 2.0 * 1.3**k))["GS424"]
    assert bad.severity == Severity.ERROR and bad.value == pytest.approx(4.0)
    (calm,) = found(_run())["GS424"]
    assert calm.severity == Severity.INFO


@pytest.mark.parametrize("case", ["within", "unclipped_step", "decay", "adam"])
def test_what_the_update_cannot_tell_is_silent(case):
    settings, update, every = SGD, 2.0, 1
    if case == "within":
        update = 0.49
    elif case == "unclipped_step":
        every = 2
    elif case == "decay":
        settings = OptimizerSettings("SGD", 1, (GroupSettings(0.05, 0.01, momentum=0.9),), "torch")
    else:
        settings = OptimizerSettings("Adam", 1, (GroupSettings(0.05, betas=(0.9, 0.99)),), "adam")
    run = _run(update, lambda k: 2.0 * 1.3**k, settings, every)
    assert "GS424" not in found(run)
