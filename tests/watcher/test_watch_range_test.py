"""An lr range test at a run's start (the rate grows at every step until the loss blows
up, the saved states are loaded back, training follows) is judged apart: its blow-up is
what it looks for. Training that starts from the weights it left (the restore forgotten)
is named (GS460). Warm-ups (exponential, linear, one-cycle), a test with no training after
it and a rate that does not fall back are no range test."""

from __future__ import annotations

import pytest
from watch_scripts import step_record

from gradscope.config import Thresholds
from gradscope.findings import Severity
from gradscope.rules.range_test import range_test_end, range_test_not_restored
from gradscope.steps.records import ParamInfo, WatchRun
from tests.watcher.watch_scripts import domain_watched


@pytest.mark.parametrize("mode", ["sgd", "adam", "linear", "refit", "fresh"])
def test_a_restored_range_test_and_its_training_are_clean(mode):
    report = domain_watched("lr_range_test.py", mode)
    loud = [f for f in report.findings if f.severity >= Severity.WARNING]
    assert loud == [], [(f.rule, f.message) for f in loud]
    assert any("were an lr range test" in n for n in report.run.notes)


@pytest.mark.parametrize("mode", ["norestore", "fresh-norestore"])
def test_training_from_the_weights_the_test_left_is_named(mode):
    report = domain_watched("lr_range_test.py", mode)
    (f,) = [f for f in report.findings if f.rule == "GS460"]
    assert f.severity == Severity.ERROR
    assert "was not undone" in f.message and "load both back" in f.advice


def _lrs(rates: list[float], losses: list[float] | None = None) -> list:
    losses = losses or [1.0] * len(rates)
    return [
        step_record(n, loss=loss, lrs=(lr,))
        for n, (lr, loss) in enumerate(zip(rates, losses, strict=True), start=1)
    ]


SWEEP = [1e-5 * 1.5**i for i in range(30)]


def test_a_sweep_followed_by_training_at_a_lower_rate_is_a_range_test():
    assert range_test_end(_lrs(SWEEP + [1e-3] * 20)) == 30
    linear = [1e-6 + 0.25 * i for i in range(5)]  # blew up at its fifth step
    assert range_test_end(_lrs(linear + [1e-3] * 20)) == 5


def test_training_on_a_fresh_optimizer_below_the_sweep_follows_a_range_test():
    fit = [step_record(31 + n, lrs=(1e-3,), optimizer=1) for n in range(20)]
    assert range_test_end(_lrs(SWEEP) + fit) == 30
    # a second optimizer at the rate the first one reached: a warm-up, then a new phase
    phase = [step_record(31 + n, lrs=(SWEEP[-1],), optimizer=1) for n in range(20)]
    assert range_test_end(_lrs(SWEEP) + phase) is None


@pytest.mark.parametrize(
    "rates",
    [
        [1e-5 * 1.5**i for i in range(30)] + [SWEEP[-1]] * 20,  # exponential warm-up, held
        SWEEP,  # a range test alone
        SWEEP + [SWEEP[-1] / 2] * 20,  # the rate falls, not back below the blow-up
        [1e-5 * 1.5**i for i in range(8)] + [1e-6] * 20,  # grows less than 100×
        [4e-5 * (i + 1) for i in range(25)] + [1e-3 * 0.99**i for i in range(20)],  # one-cycle
        [1e-3 * (i + 1) / 200 for i in range(200)] + [1e-3] * 20,  # linear warm-up from 0
    ],
)
def test_warm_ups_and_a_test_alone_are_no_range_test(rates):
    assert range_test_end(_lrs(rates)) is None


def _run(after: list[float]) -> WatchRun:
    losses = [1.39, 1.37, 1.38, 1.39, 1.38, 1.37, 1.39, 1.38] + [1.3] * 20 + [13.0, 136.0]
    steps = _lrs(SWEEP + [1e-3] * len(after), losses + after)
    return WatchRun(
        "script s.py",
        (ParamInfo("w", (4, 4), True, True, 0.1, 0, 1.0),),
        steps,
        "completed",
        1.0,
        optimizers=("SGD",),
        members=((0,),),
    )


def test_only_training_that_starts_above_the_tests_first_losses_is_named():
    from gradscope.rules.range_test import after_range_test

    left = after_range_test(_run([1.77, 2.7, 1.69] + [1.5] * 17))
    restored = after_range_test(_run([1.38, 1.36, 1.39] + [1.0] * 17))
    (f,) = range_test_not_restored(left, Thresholds())
    assert f.rule == "GS460" and f.steps == (30, 31)
    assert range_test_not_restored(restored, Thresholds()) == []
