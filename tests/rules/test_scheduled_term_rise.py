"""An early rise of a loss that mixes in a term switched on by a schedule (GS414,
information): certified training (IBP, CROWN-IBP) writes `kappa * ce(logits) + (1 - kappa)
* ce(worst_case_logits)` with kappa 1 at the first steps, then ramps epsilon and lowers kappa,
so the verified term lifts the loss by design. Both terms are cross-entropies, so the loss
read as one recognised objective and its rise was an error with learning-rate advice. A term
weighted 0 at the first steps read that a later read saw rise, or in a run too short to be
read again, makes the level say nothing alone; a mix whose every term is weighted from the
start, or whose term is still 0 at a later read (switched off), keeps its error. No torch."""

from __future__ import annotations

from gradscope.findings import Severity
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.watcher import loss_kinds
from tests.rules.test_rules_objectives import blown_up, found, run_of


def _mix(verified_weight: float) -> LossKind:
    return LossKind(
        (
            LossTerm("cross_entropy", "mean", 1.0 - verified_weight, classes=10),
            LossTerm("cross_entropy", "mean", verified_weight, classes=10),
        )
    )


def test_a_term_weighted_zero_at_the_first_steps_is_not_judged_by_the_rise():
    (f,) = found(run_of(blown_up(90), _mix(0.0)))["GS414"]
    assert f.severity == Severity.INFO and "switched on by a schedule" in f.advice


def test_a_term_still_weighted_zero_at_a_later_read_is_switched_off_not_scheduled():
    (f,) = found(run_of(blown_up(120), _mix(0.0)))["GS414"]
    assert f.severity == Severity.ERROR


def test_a_term_ramped_up_from_zero_at_a_later_read_is_not_judged_by_the_rise():
    later = loss_kinds.union(_mix(0.0), _mix(0.5))
    assert [t.ramped for t in later.terms] == [False, True]
    (f,) = found(run_of(blown_up(), later))["GS414"]
    assert f.severity == Severity.INFO


def test_a_mix_weighted_from_the_start_keeps_its_error():
    (f,) = found(run_of(blown_up(), _mix(0.5)))["GS414"]
    assert f.severity == Severity.ERROR and "learning rate" in f.advice
