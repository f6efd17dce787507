"""The inspect report for people: summary, findings with advice, parameter table.

Only this module touches rich for `inspect`. Findings of one rule that share
their advice and evidence are printed once with all their subjects, so a
model with a thousand NaN gradients gives one paragraph, not a thousand.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from itertools import groupby
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradscope.findings import Finding, Severity
from gradscope.fmt import human_bytes, num
from gradscope.results import Report
from gradscope.stats import ParamStats

if TYPE_CHECKING:
    from gradscope.check import CheckReport

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
STATUS_STYLE = {
    "ok": "green",
    "frozen": "dim",
    "none": "bold red",
    "non-finite": "bold red",
    "exploding": "red",
    "vanishing": "yellow",
    "zero": "yellow",
}
MAX_SUBJECTS = 6
INDENT = 10


def render(report: Report, console: Console, top: int | None = 30) -> None:
    """Print the whole report; `top=None` shows every parameter row."""
    _summary(report, console)
    _findings(report.findings, console)
    _params(report, console, top)
    _verdict(report, console)


def _summary(report: Report, console: Console) -> None:
    s = report.stats
    n = sum(p.numel for p in s.params)
    console.print(Text.assemble(("gradscope inspect ", "bold"), report.target))
    console.print(
        f"  model     {s.model_class} on {s.device}, {n:,} parameters in "
        f"{len(s.params)} tensors ({sum(not p.requires_grad for p in s.params)} frozen)"
    )
    loss = "-" if s.loss_value is None else num(s.loss_value)
    console.print(f"  loss      {loss}  [dim]({s.loss_source})[/dim]")
    console.print(
        f"  pass      {s.duration_s * 1e3:.1f} ms {s.timed}, "
        f"{human_bytes(s.saved_bytes)} saved for backward  "
        f"[dim](torch {report.torch_version})[/dim]"
    )


def _group_key(f: Finding) -> tuple:
    return (f.rule, f.severity, f.advice, f.evidence)


def _findings(findings: list[Finding], console: Console, header: bool = True) -> None:
    if not findings:
        console.print("\n[green]No findings.[/green]")
        return
    if header:
        console.print(f"\n[bold]Findings[/bold] ({len(findings)})")
    ordered = sorted(findings, key=lambda f: (-f.severity, f.rule))
    for (rule, sev, advice, evidence), group in groupby(ordered, key=_group_key):
        items = list(group)
        head = Text.assemble(
            (f"  {str(sev).upper():7} ", STYLE[sev]), (f"{rule} ", "bold"), (items[0].slug, "dim")
        )
        console.print(head, highlight=False)
        if len(items) == 1:
            _detail(console, "", items[0].message)
        else:
            _detail(console, f"{len(items)} subjects:", _subjects(f.subject for f in items))
            _detail(console, "e.g.", items[0].message, "dim")
        row = items[0].row
        for line in evidence:
            _detail(console, "evidence:", line)
        _detail(console, "advice:", advice)
        _detail(
            console, "table:", f"{row.symptom} | cause: {row.cause} | remedy: {row.remedy}", "dim"
        )


def _detail(console: Console, label: str, text: str, style: str = "") -> None:
    """An indented paragraph, wrapped here so no line carries trailing padding."""
    lines = textwrap.wrap(f"{label} {text}".strip(), width=max(console.width - INDENT, 40))
    for i, line in enumerate(lines):
        out = Text(" " * INDENT, style=style)
        if i == 0:
            out.append(label, style=f"bold {style}".strip())
            out.append(line[len(label) :], style=style)
        else:
            out.append(line, style=style)
        console.print(out, highlight=False, soft_wrap=True)


def _subjects(names: Iterable[str]) -> str:
    names = list(names)
    shown = ", ".join(names[:MAX_SUBJECTS])
    return shown + (
        f", ... (+{len(names) - MAX_SUBJECTS} more)" if len(names) > MAX_SUBJECTS else ""
    )


def pick_rows(report: Report, top: int | None) -> list[ParamStats]:
    """All rows if they fit; else flagged ones (earliest first), then the largest norms.

    Shown in model order either way.
    """
    params = list(report.stats.params)
    if top is None or len(params) <= top:
        return params
    ok = [report.status(p) in ("ok", "frozen") for p in params]
    rank = sorted(
        range(len(params)), key=lambda i: (ok[i], -(params[i].grad_norm or 0.0) if ok[i] else i)
    )
    keep = set(rank[:top])
    return [p for i, p in enumerate(params) if i in keep]


def _params(report: Report, console: Console, top: int | None) -> None:
    rows = pick_rows(report, top)
    table = Table(title=None, box=None, header_style="bold", pad_edge=False)
    table.add_column("parameter", overflow="fold", ratio=1, min_width=20)
    for col in ("shape", "dtype"):
        table.add_column(col, no_wrap=True)
    for col in ("grad norm", "max |grad|", "grad/weight", "zeros"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("status", no_wrap=True)
    for p in rows:
        status = report.status(p)
        zeros = "-" if p.zero_fraction is None else f"{p.zero_fraction:.0%}"
        table.add_row(
            p.name,
            "x".join(map(str, p.shape)) or "scalar",
            p.dtype,
            num(p.grad_norm),
            num(p.grad_max),
            num(p.ratio),
            zeros,
            Text(status, style=STATUS_STYLE.get(status, "")),
        )
    console.print()
    console.print(table)
    hidden = len(report.stats.params) - len(rows)
    if hidden:
        _detail(
            console,
            "",
            f"showing {len(rows)} of {len(report.stats.params)} parameter "
            "tensors (flagged first, then largest grad norm; --all shows every row)",
            "dim",
        )


def _verdict(report: Report, console: Console) -> None:
    c = report.counts()
    worst = report.worst
    style = STYLE[worst] if worst else "bold green"
    word = f"{str(worst).upper()}" if worst else "OK"
    console.print(
        Text.assemble(
            ("\nverdict: ", "bold"),
            (word, style),
            f"  ({c['error']} errors, {c['warning']} warnings, {c['info']} info)",
        )
    )


def render_check(report: CheckReport, console: Console) -> None:
    """The combined `gradscope check` report: one section per target, then the totals."""
    fail_on = report.fail_on
    for r in report.results:
        if r.error:
            state, style = "COULD NOT RUN", "bold magenta"
        elif r.failed(fail_on):
            state, style = "FAIL", "bold red"
        else:
            state, style = "PASS", "bold green"
        console.print(
            Text.assemble(
                (f"{state:13} ", style),
                (f"{r.kind} ", "dim"),
                r.target,
                (f"  ({r.duration_s:.2f} s)", "dim"),
            ),
            highlight=False,
        )
        if r.error:
            _detail(console, "error:", r.error)
        if r.findings:
            _findings(r.findings, console, header=False)
        if r.known:
            _detail(console, "", f"{len(r.known)} finding(s) already in the baseline", "dim")
    passed = sum(not r.error and not r.failed(fail_on) for r in report.results)
    console.print(
        Text.assemble(
            ("\ncheck: ", "bold"),
            f"{passed} of {len(report.results)} targets passed "
            f"(fail-on: {fail_on or 'never'}), exit code "
            f"{int(report.exit_code())}",
        )
    )
