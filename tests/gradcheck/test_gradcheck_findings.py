"""A gradcheck result as findings (gradscope/gradcheck/findings.py): each kind of failure of
a shipped example Function gives its own rule, as `gradscope gradcheck` reports it."""

from __future__ import annotations

from rich.cells import cell_len

from gradscope.examples import functions as ex
from gradscope.gradcheck import check
from gradscope.gradcheck.findings import findings
from gradscope.gradcheck.results import CAVEAT, RAISED, WRONG_GRADIENT, GradcheckReport
from gradscope.report import gradcheck_terminal
from gradscope.report.console import View


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


def test_the_terminal_report_shows_each_blocks_rule_id_at_80_columns():
    # the ids a user writes in `ignore`, on the head of every block, as other reports do
    report = GradcheckReport(
        tuple(
            check(f) for f in (ex.SquareMissingFactor, ex.BackwardRaises, ex.ExpSavedThenModified)
        )
    )
    text = gradcheck_terminal.render(report, View(width=80))
    lines = text.rstrip("\n").split("\n")
    assert max(cell_len(line) for line in lines) <= 80
    heads = [line.split() for line in lines if line.startswith(("  FAIL ", "  WARNING "))]
    said = [(head[1], head[2]) for head in heads]
    assert said == [
        (WRONG_GRADIENT, "constant-factor"),
        (RAISED, "backward-error"),
        (WRONG_GRADIENT, "mismatch"),
        (CAVEAT, "inplace-saved"),
    ], said
    # the ids shown are the rules the findings carry
    assert sorted({f.rule for f in findings(report)}) == [WRONG_GRADIENT, RAISED, CAVEAT]
