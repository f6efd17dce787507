"""Advice that points the right way: an lr so high that the gradients died is named as the
lr, not as one too small or a graph cut; a finding whose evidence holds without a cause keeps
its place; a cause leads the symptoms it really explains, and only those."""

from __future__ import annotations

import pytest
from watch_scripts import step_record, watched

from gradscope.findings import Severity
from gradscope.rules.step_dead import before_death, dead_from


def _norms(*norms: float):
    return [step_record(s, n, param_norms=(n,)) for s, n in enumerate(norms, start=1)]


@pytest.mark.parametrize(
    ("norms", "dead"),
    [
        ((1.0, 2.0, 1e-6, 1e-7, 1e-6, 1e-8), 3),  # saturated: a thousandfold below, stays
        ((1.0, 2.0, 0.0, 0.0, 0.0), 3),  # exactly 0 from step 3
        ((1.0, 1e-6, 1e-6, 5e-3, 1e-6, 1e-7), 2),  # one blip does not bring it back
        ((1.0, 0.0, 1.0, 0.9, 1.1, 1.0), None),  # a step without gradient is not death
        ((1.0, 0.5, 0.1, 0.05, 0.02, 0.01), None),  # a gradient that shrinks as it learns
        ((1.0, 2.0, 1.0, 0.0, 0.0), None),  # too few steps to say it stayed dead
    ],
)
def test_gradients_that_died_are_told_from_ones_that_shrank(norms, dead):
    steps = _norms(*norms)
    assert dead_from(steps, 0) == dead
    assert [r.step for r in before_death(steps, 0)] == [
        r.step for r in steps if dead is None or r.step < dead
    ]


def _found(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in report.findings:
        out.setdefault(f.rule, []).append(f)
    return out


@pytest.mark.slow
def test_an_lr_that_killed_the_gradients_is_named_as_too_high_and_leads():
    """RMSprop at 100× the lr of an A2C with tanh units: the weights move by their whole
    norm at step 1, the tanh units saturate, the gradients die. Judged from the ratios
    before they died: the lr is too high, and the dead gradients are its consequence."""
    report = watched("a2c_rmsprop.py", "7e-2")
    found = _found(report)
    (lr,) = found["GS419"]
    assert lr.severity == Severity.WARNING and report.findings[0] is lr
    assert "lower the learning rate" in lr.advice
    (dead,) = [e for e in lr.evidence if e.startswith("gradients that died")]
    assert "Sequential.0.weight (2)" in dead
    assert "GS410" not in found  # a ratio of 0 with no gradient is not an lr too small
    assert found["GS405"]  # the gradients fell thousandfold; to exactly 0 (GS417) on some CPUs
    for rule in ("GS405", "GS417"):
        assert all(f.explained_by == "GS419:learning-rate" for f in found.get(rule, []))
    assert all("detach()" not in f.advice for f in found.get("GS417", []))


@pytest.mark.slow
def test_the_same_a2c_at_its_own_lr_is_not_told_its_lr_is_wrong():
    found = _found(watched("a2c_rmsprop.py", "7e-4"))
    for rule in ("GS405", "GS409", "GS410", "GS417", "GS419"):
        assert rule not in found, rule


@pytest.mark.slow
def test_an_adam_lr_above_the_weights_stands_without_the_missing_zero_grad():
    """Adam at lr 0.5 alone is GS419; with zero_grad also missing, GS412 leads, the
    piled-up gradients' symptoms follow it, and GS419 keeps its place: Adam moves each
    element by about lr whatever the gradients are, so fixing zero_grad leaves it."""
    alone = _found(watched("adam_lr.py", "0.5"))
    assert alone["GS419"][0].severity == Severity.WARNING
    both = _found(watched("adam_lr.py", "0.5", "no-zero-grad"))
    (lr,) = both["GS419"]
    assert lr.explained_by is None and "lower the learning rate" in lr.advice
    assert "GS412" in both
    assert all(f.explained_by.startswith("GS412:") for f in both.get("GS414", []))
    assert "GS419" not in _found(watched("adam_lr.py", "1e-3"))


def _spiked(maximize: bool):
    """A loss near 2 with one excursion to 61.48 at step 40, in the objective's direction;
    with maximize=True the script's own loss is the negative of that."""
    from gradscope.steps.meaning import GroupSettings, OptimizerSettings
    from gradscope.steps.records import ParamInfo, WatchRun

    sign = -1.0 if maximize else 1.0
    losses = [sign * (2.0 + 0.01 * (s % 3)) for s in range(1, 61)]
    losses[39] = sign * 61.48
    recs = tuple(step_record(s, 1.0, loss) for s, loss in enumerate(losses, start=1))
    settings = OptimizerSettings("SGD", 1, (GroupSettings(0.1, maximize=maximize),), "torch")
    param = ParamInfo("w", (4, 4), True, True, 0.1, 0, 1.0)
    return WatchRun(
        "f", (param,), recs, "completed", 1.0, optimizers=("SGD",), settings=((settings,),)
    )


@pytest.mark.parametrize("maximize", [False, True])
def test_a_spike_is_told_in_the_loss_the_script_computed(maximize):
    from gradscope.config import Settings
    from gradscope.rules.watch import judge

    (spike,) = [f for f in judge(_spiked(maximize), Settings()) if f.rule == "GS402"]
    expected = "-61.5" if maximize else "61.5"
    assert f"step 40 reached {expected} " in spike.message
    assert ("maximize=True" in spike.message) is maximize


def test_a_second_loss_with_its_own_backward_is_part_of_the_steps_loss():
    """The step's loss is the sum of what its backward calls ran on: an entropy bonus given
    its own backward makes the cross-entropy's bound of 0 no bound of the step's loss."""
    kind = watched("two_losses.py").run.loss_kind(0)
    assert kind.terms[0].kind == "cross_entropy" and kind.unknown_terms >= 1
    assert kind.lower_bound() is None and "not recognised" in kind.describe()


def test_two_micro_batches_of_one_loss_keep_its_kind():
    kind = watched("two_losses.py", "twice").run.loss_kind(0)
    assert [t.kind for t in kind.terms] == ["cross_entropy"] and kind.unknown_terms == 0
    assert kind.lower_bound() == 0.0
