"""The inspect and check reports for people: summary, findings with advice, parameter table.

Renders to a string (report.console.paint), like every other format. Findings of
one rule that share their advice and evidence are printed once with all their
subjects, so a model with a thousand NaN gradients gives one paragraph, not a
thousand. Header, findings and verdict share one layout with every other command
(report/layout.py); all text is built by `styled`, never parsed as markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from gradscope.errors import ExitCode
from gradscope.findings import Finding, Severity, grouped, ignored_summary
from gradscope.fmt import clip, duration, human_bytes, num, printable
from gradscope.inspector.results import Report
from gradscope.outcome import Outcome
from gradscope.report import layout
from gradscope.report.console import View, paint
from gradscope.report.grid import Column
from gradscope.report.text import styled
from gradscope.stats import ParamStats

if TYPE_CHECKING:
    from gradscope.outcome import CheckReport

IGNORED_MARK = "*"


def render(report: Report, view: View) -> str:
    """The whole inspect report; `view.top=None` shows every parameter row."""

    def draw(console: Console) -> None:
        _summary(report, console)
        _findings(report.findings, console)
        _ignored(report.ignored, console)
        _params(report, console, view.top)
        _verdict(report, console)

    return paint(draw, view)


def _summary(report: Report, console: Console) -> None:
    s = report.stats
    n = sum(p.numel for p in s.params)
    frozen = sum(not p.requires_grad for p in s.params)
    layout.header(console, "inspect", report.target)
    loss = "-" if s.loss_value is None else num(s.loss_value)
    layout.field(
        console,
        "model",
        f"{s.model_class} on {s.device}, {n:,} parameters in {len(s.params)} "
        f"tensors ({frozen} frozen), torch {report.torch_version}",
    )
    layout.field(console, "loss", f"{loss} ({s.loss_source})")
    layout.field(
        console,
        "pass",
        f"{duration(s.duration_s)} {s.timed}, {human_bytes(s.saved_bytes)} of activations saved",
    )


def _findings(findings: list[Finding], console: Console, title: bool = True) -> None:
    if title:
        layout.findings_title(console, len(findings))
    for group in grouped(findings):
        layout.finding_block(console, group)


def _ignored(ignored: list[Finding], console: Console) -> None:
    if ignored:
        layout.note(
            console,
            ignored_summary(ignored) + f"; their rows are marked {IGNORED_MARK}",
            indent=layout.DETAIL,
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


# parameter and status always stay; the rest go, least useful first, before names get short
COLUMNS = (
    Column("shape", priority=2),
    Column("dtype", priority=1),
    Column("grad norm", right=True, priority=6),
    Column("max |grad|", right=True, priority=3),
    Column("grad/weight", right=True, priority=5),
    Column("zeros", right=True, priority=4),
)
NAME_MIN = 24
OPTIONAL = 2
"""Columns of this priority or lower go before a name is cut."""
GAP = 2
TABLE_INDENT = 2
"""The table sits under the findings' severities, like every table of every report."""


def zeros_text(fraction: float | None) -> str:
    """Never "100%" for a tensor with a non-zero element, nor "0%" for one with a zero."""
    if fraction is None:
        return "-"
    if 0 < fraction < 0.005:
        return "<1%"
    if 0.995 <= fraction < 1:
        return ">99%"
    return f"{fraction:.0%}"


def _cells(report: Report, p: ParamStats) -> dict[str, str]:
    return {
        "shape": "x".join(map(str, p.shape)) or "scalar",
        "dtype": p.dtype,
        "grad norm": num(p.grad_norm),
        "max |grad|": num(p.grad_max),
        "grad/weight": num(p.ratio),
        "zeros": zeros_text(p.zero_fraction),
    }


def fit_columns(
    names: list[str], cells: list[dict[str, str]], statuses: list[str], width: int
) -> tuple[int, list[Column]]:
    """The name column's width and the numeric columns that fit in `width`."""

    def size(col: Column) -> int:
        return max([len(col.title)] + [len(c[col.title]) for c in cells])

    status_w = max([len("status")] + [len(s) for s in statuses])
    name_want = max([len("parameter")] + [len(n) for n in names])
    # a column nothing was measured for (max |grad| and zeros of large tensors) says nothing
    kept = [c for c in COLUMNS if _measured(c, cells)]

    def room() -> int:
        return width - sum(size(c) + GAP for c in kept) - GAP - status_w

    # shape and dtype make way for whole names; the numbers only for names under NAME_MIN
    while room() < name_want and any(c.priority <= OPTIONAL for c in kept):
        kept.remove(min(kept, key=lambda c: c.priority))
    while room() < min(name_want, NAME_MIN) and kept:
        kept.remove(min(kept, key=lambda c: c.priority))
    return max(min(name_want, room()), len("parameter")), kept


def _measured(col: Column, cells: list[dict[str, str]]) -> bool:
    return not col.right or any(x[col.title] != "-" for x in cells)


def _params(report: Report, console: Console, top: int | None) -> None:
    rows = pick_rows(report, top)
    ignored = report.ignored_subjects()
    names = [printable(p.name) + (IGNORED_MARK if p.name in ignored else "") for p in rows]
    cells = [_cells(report, p) for p in rows]
    statuses = [report.status(p) for p in rows]
    name_w, kept = fit_columns(names, cells, statuses, console.width - TABLE_INDENT)
    sizes = {c.title: max([len(c.title)] + [len(x[c.title]) for x in cells]) for c in kept}

    def pad(text: str, col: Column) -> str:
        w = sizes[col.title]
        return (text.rjust(w) if col.right else text.ljust(w)) + " " * GAP

    console.print()
    lead = " " * TABLE_INDENT
    head = styled(lead, ("parameter".ljust(name_w) + " " * GAP, "bold"))
    for col in kept:
        head.append(pad(col.title, col), style="bold")
    head.append("status", style="bold")
    console.print(head, soft_wrap=True)
    for name, cell, status in zip(names, cells, statuses, strict=True):
        line = styled(lead, clip(name, name_w).ljust(name_w) + " " * GAP)
        for col in kept:
            line.append(pad(cell[col.title], col))
        line.append(status, style=layout.style_of(status))
        console.print(line, soft_wrap=True)
    notes = []
    hidden = len(report.stats.params) - len(rows)
    if hidden:
        notes.append(
            f"showing {len(rows)} of {len(report.stats.params)} parameter tensors (flagged "
            "first, then largest grad norm; --all shows every row)"
        )
    dropped = [c.title for c in COLUMNS if c not in kept and _measured(c, cells)]
    if dropped:
        notes.append(f"{', '.join(dropped)} left out at {console.width} columns (--width)")
    for n in notes:
        layout.note(console, n)


def _verdict(report: Report, console: Console) -> None:
    c = report.counts()
    worst = report.worst
    ignored = f", {len(report.ignored)} ignored" if report.ignored else ""
    console.print()
    layout.verdict(
        console,
        str(worst).upper() if worst else "OK",
        layout.style_of(str(worst).upper() if worst else "OK"),
        layout.counts(c) + ignored,
    )


STATES = ("PASS", "FAIL", "COULD NOT RUN")
STATE_SLOT = max(map(len, STATES))


def render_check(report: CheckReport, view: View) -> str:
    """The combined `gradscope check` report: one section per target, then the verdict."""

    def draw(console: Console) -> None:
        fail_on = report.fail_on
        total = len(report.results)
        plural = "s" if total != 1 else ""
        layout.header(console, "check", f"{total} target{plural} (fail-on: {fail_on or 'never'})")
        for r in report.results:
            state = target_state(r, fail_on)
            console.print()
            layout.status_line(
                console,
                state,
                layout.style_of(state),
                STATE_SLOT,
                (f"{r.kind} ", "dim"),
                r.label,
                (f"  ({duration(r.duration_s)})", "dim"),
            )
            if r.could_not_run:
                layout.detail(console, "error:", r.could_not_run)
            _findings(r.findings, console, title=False)
            if r.known:
                known = f"{len(r.known)} finding(s) already in the baseline"
                layout.note(console, known, indent=layout.DETAIL)
            _ignored(r.ignored, console)
        passed = sum(target_state(r, fail_on) == "PASS" for r in report.results)
        code = report.exit_code()
        word = {ExitCode.OK: "PASS", ExitCode.ERROR: "COULD NOT RUN"}.get(code, "FAIL")
        console.print()
        layout.verdict(
            console,
            word,
            layout.style_of(word),
            f"{passed} of {total} targets passed, exit code {code:d}",
        )

    return paint(draw, view)


def target_state(r: Outcome, fail_on: Severity | None) -> str:
    """PASS, FAIL or COULD NOT RUN: the word for a target, in the report and in
    `check`'s progress lines alike."""
    if r.could_not_run:
        return "COULD NOT RUN"
    return "FAIL" if r.failed(fail_on) else "PASS"
