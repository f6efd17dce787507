"""The gradcheck report for people: per target, its inputs, what failed where, and why.

Takes plain results (gradscope/gradcheck/results.py) and a View; prints nothing else.
Header, failure blocks and verdict are the shared layout (report/layout.py); the spec,
input labels and messages go through `styled`, never parsed as markup.
"""

from __future__ import annotations

from rich.console import Console

from gradscope.fmt import duration, num
from gradscope.gradcheck.results import (
    CAVEAT,
    CHECKS,
    RAISED,
    SURROGATE,
    UNCHECKED,
    WRONG_GRADIENT,
    CheckError,
    Element,
    FunctionResult,
    GradcheckReport,
    PairFailure,
)
from gradscope.report import grid, layout
from gradscope.report.console import View, paint
from gradscope.report.text import Part

SHOW_WORST = 3
DIGITS = 4
"""Significant digits of gradient values: 4 tell a missing factor 2 from rounding."""
PASS, FAIL = ("PASS", layout.style_of("PASS")), ("FAIL", layout.style_of("FAIL"))


def render(report: GradcheckReport, view: View) -> str:
    """The whole gradcheck report as terminal text."""
    return paint(lambda console: _render(report, console), view)


def _render(report: GradcheckReport, console: Console) -> None:
    targets = report.targets
    label = targets[0].spec if len(targets) == 1 else f"{len(targets)} targets"
    layout.header(console, "gradcheck", label)
    for target in targets:
        console.print()
        render_target(target, console)
    console.print()
    _verdict(report, console)


def render_target(t: FunctionResult, console: Console) -> None:
    state, style = PASS if t.passed else FAIL
    layout.status_line(
        console, state, style, len(state), (t.spec, "bold"), (f"  ({t.kind})", "dim")
    )
    calls = sum(c.calls for c in t.checks)
    tol = t.tolerance
    layout.note(
        console,
        f"{t.dtype} · seed {t.seed} · atol {tol.get('atol', 0):g} · rtol "
        f"{tol.get('rtol', 0):g} · {calls} calls · {duration(t.duration_s)}",
    )
    _inputs(t, console)
    if t.failures:
        _failures(t.failures, console)
        console.print()  # the blocks below the table, as every report's findings
        for f in t.failures:
            _explain(f, console)
    for e in t.errors:
        _error(e, console)
    for n in t.notes:
        layout.finding_head(console, "WARNING", "yellow", (CAVEAT, "bold"), " ", (n.slug, "bold"))
        layout.detail(console, "", n.message)


def _inputs(t: FunctionResult, console: Console) -> None:
    ran = [c for c in CHECKS if any(s.name == c for s in t.checks)]
    columns = [grid.Column("input", style="bold"), grid.Column("shape"), grid.Column("dtype")]
    columns += [grid.Column("checked"), *(grid.Column(check) for check in ran)]
    failed = {(f.check, f.input.name) for f in t.failures}
    errored = {e.check for e in t.errors}
    unchecked = {n.subject for n in t.notes if n.slug in (UNCHECKED, SURROGATE)}
    rows: list[list[Part]] = []
    for info in t.inputs:
        marks: list[Part] = []
        for check in ran:
            bad = (check, info.name) in failed or check in errored
            mark = ("?", "yellow") if info.name in unchecked else ("✓", "green")
            marks.append(("✗", "red") if bad else mark)
        shape = "×".join(map(str, info.shape)) or "scalar"
        rows.append([info.label, shape, info.dtype, info.coverage or "-", *marks])
    grid.grid(console, columns, rows)


def _failures(failures: tuple[PairFailure, ...], console: Console) -> None:
    """One row per failing (check, input, output); where and why follow in each block."""
    columns = [grid.Column(head) for head in ("check", "input", "output")]
    columns += [grid.Column("max abs", right=True), grid.Column("max rel", right=True)]
    columns.append(grid.Column("diagnosis", style="bold red"))
    rows: list[list[Part]] = [
        [
            f.check,
            f.input.label,
            f.output,
            num(f.max_abs_error, DIGITS),
            num(f.max_rel_error, DIGITS),
            f.diagnosis.slug,
        ]
        for f in failures
    ]
    console.print()
    grid.grid(console, columns, rows)


def _where(e: Element) -> str:
    return f"{list(e.output_index)} ← {list(e.input_index)}"


def _explain(f: PairFailure, console: Console) -> None:
    layout.finding_head(
        console,
        "FAIL",
        "red",
        (WRONG_GRADIENT, "bold"),
        " ",
        (f.diagnosis.slug, "bold"),
        f"  {f.check} · {f.input.label} → {f.output}",
    )
    layout.detail(console, "", f.diagnosis.message)
    for e in f.worst[:SHOW_WORST]:
        layout.detail(
            console,
            "",
            f"d {f.output}{list(e.output_index)} / d {f.input.name}{list(e.input_index)}: "
            f"analytical {num(e.analytical, DIGITS)}, numerical {num(e.numerical, DIGITS)}",
        )
    if f.resolution != "full":
        layout.detail(console, "", f"(explained on {f.resolution})", style="dim")


def _error(e: CheckError, console: Console) -> None:
    where = f" at {e.location}" if e.location else ""
    layout.finding_head(
        console, "FAIL", "red", (RAISED, "bold"), " ", (e.diagnosis.slug, "bold"), f"  {e.check}"
    )
    layout.detail(console, "", f"{e.message}{where}")
    layout.detail(console, "", e.diagnosis.message)


def _verdict(report: GradcheckReport, console: Console) -> None:
    failed = [t.spec for t in report.targets if not t.passed]
    total = len(report.targets)
    if not failed:
        layout.verdict(console, *PASS, f"{total} of {total} targets passed")
    else:
        layout.verdict(
            console, *FAIL, f"{len(failed)} of {total} targets failed: {', '.join(failed)}"
        )
