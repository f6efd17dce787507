"""GS403 under an optimizer whose step is about the lr whatever the gradient's scale (Adam's
family): a lone gradient-norm spike the loss did not feel, the loss falling on, is
information (NormFormer's learning onset); the same spike under SGD at its constant lr,
repeated spikes, or one the loss jumps with stay warnings. Under SGD after its lr fell
tenfold, a lone spike whose step (lr times the gradient) is no larger than the steps the
run took before the decay is information too; one far beyond them stays a warning."""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules.step_norm_spike import norm_spike
from gradscope.steps.meaning import GroupSettings, OptimizerSettings
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import step_record

ADAMW = OptimizerSettings(
    "AdamW", 1, (GroupSettings(3e-3, 0.01, True, None, (0.9, 0.999)),), "adam"
)
SGD = OptimizerSettings("SGD", 1, (GroupSettings(0.1, 0.0, False, 0.9),), "torch")


def run_of(settings, spikes=(46,), loss_jump=False, decay_at=None, height=4.0):
    norms = [0.6 + 0.01 * (i % 5) + 0.004 * i for i in range(120)]
    losses = [2.3 - 0.006 * i + 0.01 * (i % 3) for i in range(120)]
    for i in spikes:
        norms[i] = height
        if loss_jump:
            losses[i] = 6.0
    lrs = [0.1 if decay_at is None or i < decay_at else 0.01 for i in range(120)]
    steps = tuple(
        step_record(i + 1, n, loss=x, lrs=(lr,))
        for i, (n, x, lr) in enumerate(zip(norms, losses, lrs, strict=True))
    )
    params = (ParamInfo("w", (8, 8), True, True, 0.1),)
    return WatchRun(
        "t", params, steps, "completed", 1.0, optimizers=(settings.kind,), settings=((settings,),)
    )


def severities(run):
    return [f.severity for f in norm_spike(run, Thresholds())]


def test_a_lone_spike_under_adamw_the_loss_did_not_feel_is_information():
    (found,) = norm_spike(run_of(ADAMW), Thresholds())
    assert found.severity == Severity.INFO and found.steps == (47,)
    assert "under AdamW each element's step is about the lr" in found.message


def test_sgd_repeated_spikes_and_a_loss_that_jumped_stay_warnings():
    assert severities(run_of(SGD)) == [Severity.WARNING]
    assert severities(run_of(ADAMW, spikes=(46, 47))) == [Severity.WARNING]
    assert severities(run_of(ADAMW, loss_jump=True)) == [Severity.WARNING]


def test_a_lone_sgd_spike_after_the_lr_fell_tenfold_is_information():
    (found,) = norm_spike(run_of(SGD, spikes=(100,), decay_at=80), Thresholds())
    assert found.severity == Severity.INFO and found.steps == (101,)
    assert "the step is the lr times the gradient" in found.message


def test_a_lone_sgd_spike_far_beyond_the_steps_before_the_decay_stays_a_warning():
    run = run_of(SGD, spikes=(100,), decay_at=80, height=40.0)
    assert severities(run) == [Severity.WARNING]
