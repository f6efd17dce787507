"""A gradcheck result as findings (gradscope/gradcheck/findings.py): each kind of failure of
a shipped example Function gives its own rule, as `gradscope gradcheck` reports it."""

from __future__ import annotations

from gradscope.examples import functions as ex
from gradscope.gradcheck import check
from gradscope.gradcheck.findings import findings
from gradscope.gradcheck.results import GradcheckReport


def _rules_of(*functions: object) -> list[str]:
    report = GradcheckReport(tuple(check(f) for f in functions))
    return [f.rule for f in findings(report)]


def test_a_wrong_backward_is_a_jacobian_mismatch():
    assert _rules_of(ex.SquareMissingFactor) == ["GS201"]


def test_a_backward_that_raises_is_named_as_raised():
    assert _rules_of(ex.BackwardRaises) == ["GS202"]


def test_a_tensor_saved_then_changed_in_place_is_a_caveat():
    assert _rules_of(ex.ExpSavedThenModified) == ["GS201", "GS203"]


def test_a_correct_function_has_no_finding():
    assert _rules_of(ex.CustomReLU) == []
