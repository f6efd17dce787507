"""`gradscope watch` in the terminal (rich): summary, grouped findings, layers over time.

Every string that came from the user's code (parameter and module names, the script's
path, its error) is printed as `Text`, never parsed as markup, with control characters
made visible.
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gradscope.fmt import printable
from gradscope.report.console import View, paint
from gradscope.watcher.groups import binned_max, group_norm, layer_groups
from gradscope.watcher.marks import marks
from gradscope.watcher.report import WatchReport

SPARK = "▁▂▃▄▅▆▇█"
STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _steps(n: int) -> str:
    return f"{n} step{'' if n == 1 else 's'}"


def plain(text: str, style: str = "") -> Text:
    """The user's text as it is: no markup, control characters shown as escapes."""
    return Text(printable(text), style=style)


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
    run = report.run
    console.print(plain(f"gradscope watch · {run.label}", "bold"))
    head = Text(
        f"{s['steps']} optimizer steps ({', '.join(s['optimizers']) or 'no optimizer'}), "
        f"{s['duration_s']:.1f} s, {s['parameters']} parameters tracked · {s['status']}"
    )
    if report.failure():
        head.append_text(plain(f" ({report.failure()})"))
    console.print(head)
    if report.partial:
        why = {"crashed": "crashed", "terminated": "was terminated (SIGTERM)"}.get(
            run.status, "was interrupted"
        )
        console.print(
            Text(
                f"partial report: it covers the {_steps(len(run.steps))} before the script {why}",
                style="bold yellow",
            )
        )
    if not report.judged:
        console.print(plain(str(report.nothing_judged())))
    elif len(run.optimizers) > 1:
        for entry in s["per_optimizer"]:
            console.print(
                _loss_and_norm(plain(f"{entry['label']}: {_steps(entry['steps'])} · "), entry)
            )
    else:
        console.print(_loss_and_norm(Text(), s))
    for note in s["notes"]:
        console.print(plain(f"note: {note}", "dim"))


def _loss_and_norm(text: Text, s: dict[str, Any]) -> Text:
    loss, norm = s["loss"], s["grad_norm"]
    text.append(
        f"loss {_num(loss['first'])} → {_num(loss['last'])} (min {_num(loss['min'])}, "
        f"max {_num(loss['max'])}) · grad norm {_num(norm['first'])} → {_num(norm['last'])} "
        f"(max {_num(norm['max'])})"
    )
    if "clipped_steps" in s:
        text.append(f" · clipped {s['clipped_steps']} · skipped {s['skipped_steps']}")
    return text


def _findings(report: WatchReport, console: Console) -> None:
    console.print()
    if not report.findings:
        if report.partial:
            console.print(Text(f"no findings in the {_steps(len(report.run.steps))} recorded"))
        else:
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
            console.print(plain(f"  {text}"))
            for e in f.evidence:
                console.print(plain(f"    {e}", "dim"))
        if len(group) > 8:
            console.print(Text(f"  … {len(group) - 8} more of {rule}", style="dim"))
        console.print(plain(f"  → {first.advice}", "italic"))


def _over_time(report: WatchReport, console: Console) -> None:
    steps = report.run.steps
    if not steps:
        return
    everything = list(range(len(report.run.params)))
    if len(report.run.optimizers) <= 1:
        title = f"gradient norm over steps 1-{steps[-1].step} (log scale, max per bin)"
        _table(report, console, list(steps), everything, title)
        return
    for i in range(len(report.run.optimizers)):  # a GAN's D and G: separate quantities
        own = [r for r in steps if r.optimizer == i]
        if not own:
            continue
        members = list(report.run.members[i]) if i < len(report.run.members) else everything
        title = (
            f"{report.optimizer_label(i)}: gradient norm over its {_steps(len(own))} "
            "(log, max per bin)"
        )
        _table(report, console, own, members or everything, title)


def _table(
    report: WatchReport, console: Console, steps: list[Any], members: list[int], title: str
) -> None:
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
    names = report.run.names()
    groups = layer_groups([names[i] for i in members if i < len(names)], 12)
    for name, local in groups.items():
        series = [group_norm(r, [members[j] for j in local]) for r in steps]
        table.add_row(plain(name), sparkline(series, width), _num(series[-1]))
    for m in marks(report):
        if set(m.steps) & {r.step for r in steps}:
            row = _mark_row(m.steps, [r.step for r in steps], width, m.symbol)
            table.add_row(m.label, row, "")
    console.print()
    console.print(plain(title, "italic"))
    console.print(table)


def _mark_row(marked: tuple[int, ...], steps: list[int], width: int, symbol: str) -> Text:
    hit = set(marked)
    flags: list[float | None] = [1.0 if s in hit else None for s in steps]
    text = Text()
    for v in binned_max(flags, width):
        text.append(symbol if v else " ", style="bold magenta")
    return text
