"""`gradscope watch` in the terminal (rich): summary, grouped findings, layers over time."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradscope.report.console import View, paint
from gradscope.watcher.groups import binned_max, group_norm, layer_groups
from gradscope.watcher.marks import marks
from gradscope.watcher.report import WatchReport

SPARK = "▁▂▃▄▅▆▇█"
STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def sparkline(values: list[float | None], width: int) -> Text:
    """Log-scaled bars; a bin holding NaN/Inf is a red ✕, one without gradient a space."""
    binned = binned_max(values, width)
    logs = [math.log10(v) for v in binned if v is not None and math.isfinite(v) and v > 0]
    lo, hi = (min(logs), max(logs)) if logs else (0.0, 1.0)
    text = Text()
    for v in binned:
        if v is None:
            text.append(" ")
        elif not math.isfinite(v):
            text.append("✕", style="bold red")
        elif v <= 0:
            text.append("·", style="dim")
        else:
            level = 0 if hi == lo else round((math.log10(v) - lo) / (hi - lo) * 7)
            text.append(SPARK[level], style="green")
    return text


def render(report: WatchReport, view: View) -> str:
    """The whole watch report as terminal text."""
    return paint(lambda console: _render(report, console), view)


def _render(report: WatchReport, console: Console) -> None:
    _summary(report, console)
    _findings(report, console)
    _over_time(report, console)


def _summary(report: WatchReport, console: Console) -> None:
    s = report.summary()
    console.print(Text(f"gradscope watch · {report.run.label}", style="bold"))
    status = s["status"] + (f" ({s['error']})" if s["error"] else "")
    console.print(
        f"{s['steps']} optimizer steps ({', '.join(s['optimizers']) or 'no optimizer'}), "
        f"{s['duration_s']:.1f} s, {s['parameters']} parameters tracked · {status}"
    )
    loss, norm = s["loss"], s["grad_norm"]
    console.print(
        f"loss {_num(loss['first'])} → {_num(loss['last'])} (min {_num(loss['min'])}, "
        f"max {_num(loss['max'])}) · grad norm {_num(norm['first'])} → {_num(norm['last'])} "
        f"(max {_num(norm['max'])}) · clipped {s['clipped_steps']} · skipped "
        f"{s['skipped_steps']}"
    )
    for note in s["notes"]:
        console.print(f"note: {note}", style="dim")


def _findings(report: WatchReport, console: Console) -> None:
    console.print()
    if not report.findings:
        console.print(Text("no findings", style="bold green"))
        return
    by_rule: dict[str, list[Any]] = {}
    for f in report.findings:
        by_rule.setdefault(f.rule, []).append(f)
    for rule, group in by_rule.items():
        first = group[0]
        head = Text(f"{rule} {first.slug}", style=STYLE[str(first.severity)])
        head.append(f"  {first.severity} · {len(group)} finding(s) · {first.row.symptom}")
        console.print(head)
        for f in group[:8]:
            text = f.message if f.message.startswith(f.subject) else f"{f.subject}: {f.message}"
            console.print(f"  {text}")
            for e in f.evidence:
                console.print(f"    {e}", style="dim")
        if len(group) > 8:
            console.print(f"  … {len(group) - 8} more of {rule}", style="dim")
        console.print(f"  → {first.advice}", style="italic")


def _over_time(report: WatchReport, console: Console) -> None:
    steps = report.run.steps
    if not steps:
        return
    width = max(20, min(60, (console.width or 100) - 40))
    table = Table(box=None, pad_edge=False)  # title printed apart: a narrow table wraps it
    table.add_column("", overflow="ellipsis", max_width=24, no_wrap=True)
    table.add_column("", no_wrap=True)
    table.add_column("last", justify="right", no_wrap=True)
    losses = [r.loss for r in steps]
    table.add_row("loss", sparkline(losses, width), _num(steps[-1].loss))
    table.add_row(
        "total norm", sparkline([r.grad_norm for r in steps], width), _num(steps[-1].grad_norm)
    )
    groups = layer_groups(report.run.names(), 12)
    for name, members in groups.items():
        series = [group_norm(r, members) for r in steps]
        table.add_row(name, sparkline(series, width), _num(series[-1]))
    for m in marks(report):
        table.add_row(m.label, _mark_row(m.steps, [r.step for r in steps], width, m.symbol), "")
    console.print()
    console.print(
        f"gradient norm over steps 1-{steps[-1].step} (log scale, max per bin)", style="italic"
    )
    console.print(table)


def _mark_row(marked: tuple[int, ...], steps: list[int], width: int, symbol: str) -> Text:
    hit = set(marked)
    flags: list[float | None] = [1.0 if s in hit else None for s in steps]
    text = Text()
    for v in binned_max(flags, width):
        text.append(symbol if v else " ", style="bold magenta")
    return text
