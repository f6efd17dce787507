"""The gradcheck report for people: per target, its inputs, what failed where, and why.

Takes plain results (gradscope/gradcheck/results.py) and a rich Console; prints nothing else.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gradscope import fmt
from gradscope.gradcheck.results import (
    CHECKS,
    CheckError,
    Element,
    FunctionResult,
    GradcheckReport,
    PairFailure,
)
from gradscope.report.console import View, paint

SHOW_WORST = 3


def num(x: float | None) -> str:
    return fmt.num(x, digits=4)


def render(report: GradcheckReport, view: View) -> str:
    """The whole gradcheck report as terminal text."""
    return paint(lambda console: _render(report, console), view)


def _render(report: GradcheckReport, console: Console) -> None:
    for target in report.targets:
        render_target(target, console)
        console.print()
    _verdict(report, console)


def render_target(t: FunctionResult, console: Console) -> None:
    mark = "[bold green]PASS[/]" if t.passed else "[bold red]FAIL[/]"
    calls = sum(c.calls for c in t.checks)
    tol = t.tolerance
    console.print(f"{mark} [bold]{escape(t.spec)}[/] ({t.kind})", highlight=False)
    console.print(
        f"  [dim]{t.dtype} · seed {t.seed} · atol {tol.get('atol', 0):g} · rtol "
        f"{tol.get('rtol', 0):g} · {calls} calls · {t.duration_s * 1e3:.0f} ms[/]",
        highlight=False,
    )
    console.print(_inputs(t))
    if t.failures:
        console.print(_failures(t.failures))
        for f in t.failures:
            _explain(f, console)
    for e in t.errors:
        _error(e, console)
    for n in t.notes:
        console.print(
            f"  [yellow]warning[/] [dim]{n.slug}[/]: {escape(n.message)}", highlight=False
        )


def _inputs(t: FunctionResult) -> Table:
    ran = [c for c in CHECKS if any(s.name == c for s in t.checks)]
    table = Table(box=None, padding=(0, 2), pad_edge=True, show_edge=False)
    for head in ("input", "shape", "dtype", "checked", *ran):
        table.add_column(head, style="bold" if head == "input" else None)
    failed = {(f.check, f.input.name) for f in t.failures}
    errored = {e.check for e in t.errors}
    for info in t.inputs:
        marks = []
        for check in ran:
            bad = (check, info.name) in failed or check in errored
            marks.append("[red]✗[/]" if bad else "[green]✓[/]")
        table.add_row(
            escape(info.label),
            "×".join(map(str, info.shape)) or "scalar",
            info.dtype,
            info.coverage or "-",
            *marks,
        )
    return table


def _failures(failures: tuple[PairFailure, ...]) -> Table:
    table = Table(box=None, padding=(0, 2), show_edge=False, title_justify="left")
    for head in ("check", "input", "output", "max abs", "max rel", "worst (out ← in)", "diagnosis"):
        table.add_column(head, style="bold red" if head == "diagnosis" else None)
    for f in failures:
        table.add_row(
            f.check,
            escape(f.input.label),
            escape(f.output),
            num(f.max_abs_error),
            num(f.max_rel_error),
            _where(f.worst[0]) if f.worst else "-",
            f.diagnosis.slug,
        )
    return table


def _where(e: Element) -> str:
    return f"{list(e.output_index)} ← {list(e.input_index)}"


def _explain(f: PairFailure, console: Console) -> None:
    console.print(
        f"  [red]✗[/] {f.check} · {escape(f.input.label)} → {escape(f.output)}: "
        f"[bold]{f.diagnosis.slug}[/]",
        highlight=False,
    )
    console.print(f"      {escape(f.diagnosis.message)}", highlight=False)
    for e in f.worst[:SHOW_WORST]:
        console.print(
            f"      d {escape(f.output)}{list(e.output_index)} / d "
            f"{escape(f.input.name)}{list(e.input_index)}: analytical "
            f"{num(e.analytical)}, numerical {num(e.numerical)}",
            highlight=False,
        )
    if f.resolution != "full":
        console.print(f"      [dim](explained on {f.resolution})[/]", highlight=False)


def _error(e: CheckError, console: Console) -> None:
    where = f" at {e.location}" if e.location else ""
    console.print(f"  [red]✗[/] {e.check}: {escape(e.message)}{where}", highlight=False)
    console.print(
        f"      [bold]{e.diagnosis.slug}[/]: {escape(e.diagnosis.message)}", highlight=False
    )


def _verdict(report: GradcheckReport, console: Console) -> None:
    failed = [t.spec for t in report.targets if not t.passed]
    total = len(report.targets)
    if not failed:
        console.print(f"[bold green]gradcheck passed[/]: {total} of {total} targets")
    else:
        console.print(
            f"[bold red]gradcheck failed[/]: {len(failed)} of {total} targets "
            f"({escape(', '.join(failed))})",
            highlight=False,
        )
