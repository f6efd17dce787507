"""The diff's terminal report and findings from fabricated results (no model runs)."""

from __future__ import annotations

from gradscope.diff import findings
from gradscope.diff.compare import origin
from gradscope.diff.result import Alignment, Delta, DiffResult, ModuleRow, ParamRow, Tolerance
from gradscope.report import diff_terminal
from gradscope.report.console import View

TOL = Tolerance(1e-5, 1e-7)


def delta(x: float, shape: str = "") -> Delta:
    return Delta(x, 1.0, x > 1e-5 or bool(shape), TOL, "float32", shape)


def result(rows: list[ModuleRow], start: int | None, **kw) -> DiffResult:
    r = DiffResult(
        "ref.py:build",
        "port.py:build",
        rows,
        [ParamRow("fc.weight", "fc.weight", (4, 4), "name", True, delta(0.0))],
        Alignment((("fc.weight", "fc.weight", "name"),), **kw),
        delta(0.0),
        1.0,
        1.0,
        start,
        start,
        None,
        None,
        TOL,
        passes=4,
    )
    r.findings = findings.of(r)
    return r


def test_origin_is_the_first_differing_output_with_agreeing_inputs():
    assert origin([False, True, True, True], [True, False, True, True]) == (2, 1)
    assert origin([False, True], [True, False]) == (1, 1)  # none agrees: the first differing
    assert origin([False, False], [True, True]) == (None, None)


def test_report_marks_start_randomness_partners_and_shapes():
    rows = [
        ModuleRow("emb", "emb", 0, "Embedding", delta(0.0), None),
        ModuleRow("drop", "drop", 0, "Dropout", delta(0.5), delta(0.0), ref_random=True),
        ModuleRow("aux", None, 0, "Linear"),
        ModuleRow("fc", "fc", 0, "Linear", delta(0.0, "4×4 vs 2×8"), delta(0.5)),
        ModuleRow("", "", 0, "Net", delta(0.5), delta(0.0), new_where="port.py:12"),
    ]
    text = diff_terminal.render(result(rows, 1, modules_new_only=("extra",)), View(80))
    assert "the difference starts at drop (Dropout)" in text
    assert "◀ starts here random (ref)" in text
    assert "no partner" in text and "shape" in text
    assert "noise-limited" in text  # GS603 for the reference
    assert max(len(line) for line in text.splitlines()) <= 80
    assert not any(line.endswith(" ") for line in text.splitlines())


def test_identical_report_says_so():
    rows = [ModuleRow("fc", "fc", 0, "Linear", delta(0.0), delta(0.0))]
    r = result(rows, None)
    text = diff_terminal.render(r, View(80))
    assert "verdict: IDENTICAL  (bitwise: 1 module outputs" in text and r.findings == []
    assert r.to_dict()["summary"]["verdict"] == "identical (bitwise)"


def test_user_text_is_not_markup():
    rows = [ModuleRow("[bold]x[/bold]", "[red]y", 0, "A", delta(1.0), delta(0.0))]
    text = diff_terminal.render(result(rows, 0), View(80))
    assert "[red]y" in text and "[bold]x[/bold]" in text
