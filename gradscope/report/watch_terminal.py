"""`gradscope watch` in the terminal (rich): summary, grouped findings, layers over time.

Header, fields, finding blocks and verdict are the shared layout (report/layout.py);
every string that came from the user's code (parameter and module names, the script's
path, its error) goes through `styled`: never parsed as markup, control characters shown.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from rich.console import Console
from rich.text import Text

from gradscope.findings import Finding
from gradscope.fmt import clip, duration, num
from gradscope.report import grid, layout
from gradscope.report.console import View, paint
from gradscope.report.text import Part
from gradscope.report.watch_groups import binned_max, group_norm, layer_groups
from gradscope.report.watch_marks import marks
from gradscope.steps.step_record import steps_by_optimizer
from gradscope.watcher.report import WatchReport

SPARK = "▁▂▃▄▅▆▇█"
NAME_WIDTH = 24
"""The widest a layer's name gets in the table; a longer one is cut in its middle."""
LAST_WIDTH = 9
"""Room kept for the "last" column: the widest `fmt.num` writes, `-1.23e-05`."""


def _steps(n: int, noun: str = "step") -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


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
    _verdict(report, console)


def _summary(report: WatchReport, console: Console) -> None:
    s = report.summary()
    run = report.run
    layout.header(console, "watch", run.label)
    optimizers = _kinds(s["optimizers"]) or "no optimizer"
    layout.field(
        console,
        "run",
        f"{_steps(s['steps'], 'optimizer step')} ({optimizers}), "
        f"{duration(s['duration_s'])}, {s['parameters']} parameters tracked · {s['status']}",
    )
    failure = report.failure()
    if failure:
        layout.field(console, "error", failure)
    if report.partial:
        why = {"crashed": "crashed", "terminated": "was terminated (SIGTERM)"}.get(
            run.status, "was interrupted"
        )
        covers = f"the report covers the {_steps(len(run.steps))} before the script {why}"
        layout.field(console, "partial", (covers, "yellow"))
    if report.judged and len(run.optimizers) > 1:
        shown = _shown(report)
        for entry in s["per_optimizer"]:
            if entry["index"] not in shown:
                continue
            layout.line(
                console,
                f"  {entry['label']}: {_steps(entry['steps'])} · ",
                _loss_and_norm(entry),
                hang=layout.FIELD,
            )
        _more(console, s["per_optimizer"], shown)
    elif report.judged:
        layout.field(console, "steps", _loss_and_norm(s))
    if report.judged:
        for i, n in enumerate(report.noise):
            line = n.line().removeprefix("noise scale: ")
            layout.field(console, "" if i else "noise", (line, "" if n.resolved else "dim"))
    for i, note in enumerate(s["notes"]):  # a distributed run's are a table: kept aligned
        layout.field(console, "" if i else "notes", (note, "dim"))


SHOWN = 6
"""Optimizers given a line and a table of their own; a run that makes one per task (a
meta-learning loop, federated clients) has hundreds, summed up in one line."""


def _shown(report: WatchReport) -> set[int]:
    """The optimizers shown one by one: those the findings name, then those with the most
    steps, SHOWN in all (every one where there are no more)."""
    count = len(report.run.optimizers)
    if count <= SHOWN:
        return set(range(count))
    named = [i for i in range(count) if _named(report, i)]
    steps = {i: len(own) for i, own in steps_by_optimizer(report.run.steps).items()}
    busiest = sorted(range(count), key=lambda i: (-steps.get(i, 0), i))
    return set((named + [i for i in busiest if i not in named])[:SHOWN])


def _named(report: WatchReport, i: int) -> bool:
    """A finding is about the optimizer: its subject names it (`loss (optimizer 3 (SGD,
    ...))`, `total-grad-norm (optimizer 3 ...)`)."""
    return any(f"optimizer {i} (" in f.subject for f in report.findings)


def _more(console: Console, entries: list[dict[str, Any]], shown: set[int]) -> None:
    """One line for the optimizers not shown: their kinds and steps."""
    rest = [e for e in entries if e["index"] not in shown]
    if rest:
        counts = sorted({e["steps"] for e in rest})
        each = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        kinds = _kinds([e["optimizer"] for e in rest])
        line = f"  and {len(rest)} more optimizers ({kinds}, {each} steps each): "
        line += "--format json lists each"
        layout.line(console, line, "", hang=layout.FIELD)


def _kinds(names: list[str]) -> str:
    """`SGD ×30, Adam`: each kind once, in order of first use, counted where repeated."""
    counts = Counter(names)
    return ", ".join(k if counts[k] == 1 else f"{k} ×{counts[k]}" for k in dict.fromkeys(names))


def _loss_and_norm(s: dict[str, Any]) -> str:
    loss, norm = s["loss"], s["grad_norm"]
    text = (
        f"loss {num(loss['first'])} → {num(loss['last'])} (min {num(loss['min'])}, "
        f"max {num(loss['max'])}) · grad norm {num(norm['first'])} → {num(norm['last'])} "
        f"(max {num(norm['max'])})"
    )
    if "clipped_steps" in s:
        text += f" · clipped {s['clipped_steps']} · skipped {s['skipped_steps']}"
    return text


def _findings(report: WatchReport, console: Console) -> None:
    recorded = f"No findings in the {_steps(len(report.run.steps))} recorded."
    empty = recorded if report.partial else "No findings."
    layout.findings_title(console, len(report.findings), empty)
    by_rule: dict[str, list[Finding]] = {}
    for f in report.findings:
        by_rule.setdefault(f.rule, []).append(f)
    for group in by_rule.values():
        layout.finding_block(console, group, each=True)


def _verdict(report: WatchReport, console: Console) -> None:
    s = report.summary()
    c = s["counts"]
    counts = layout.counts(c)
    console.print()
    if not report.judged:
        layout.verdict(
            console, "NOT JUDGED", layout.style_of("NOT JUDGED"), str(report.nothing_judged())
        )
    elif report.partial:
        recorded = f"{counts} in the {_steps(len(report.run.steps))} recorded"
        layout.verdict(console, report.run.status.upper(), "bold magenta", recorded)
    else:
        word = s["verdict"].upper()
        layout.verdict(console, word, layout.style_of(word, layout.STYLE["OK"]), counts)


def _over_time(report: WatchReport, console: Console) -> None:
    steps = report.run.steps
    if not steps:
        return
    everything = list(range(len(report.run.params)))
    if len(report.run.optimizers) <= 1:
        title = f"gradient norm over steps 1-{steps[-1].step} (log scale, max per bin)"
        _table(report, console, list(steps), everything, title)
        return
    own_steps = steps_by_optimizer(steps)
    for i in sorted(_shown(report)):  # a GAN's D and G: separate quantities
        own = own_steps.get(i, [])
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
    names = report.run.names()
    groups = layer_groups([names[i] for i in members if i < len(names)], 12)
    shown = [m for m in marks(report) if set(m.steps) & {r.step for r in steps}]
    # the mark rows' labels ("GS403 norm spike") share the name column: counted too, so
    # the sparklines leave them room and the table stays a table
    longest = max(len(n) for n in ["total norm", *groups, *(m.label for m in shown)])
    name_width = min(NAME_WIDTH, console.width // 3, longest)
    room = console.width - 2 - name_width - LAST_WIDTH - 2 * grid.GAP
    width = max(8, min(60, room))
    rows: list[list[Part]] = []
    losses = [r.loss for r in steps]
    rows.append(["loss", sparkline(losses, width), num(steps[-1].loss)])
    rows.append(
        ["total norm", sparkline([r.grad_norm for r in steps], width), num(steps[-1].grad_norm)]
    )
    for name, local in groups.items():
        series = [group_norm(r, [members[j] for j in local]) for r in steps]
        rows.append([clip(name, name_width), sparkline(series, width), num(series[-1])])
    for m in shown:
        row = _mark_row(m.steps, [r.step for r in steps], width, m.symbol)
        rows.append([clip(m.label, name_width), row, ""])
    console.print()
    layout.line(console, (title, "italic"))
    columns = [grid.Column(""), grid.Column(""), grid.Column("last", right=True)]
    grid.grid(console, columns, rows)


def _mark_row(marked: tuple[int, ...], steps: list[int], width: int, symbol: str) -> Text:
    hit = set(marked)
    flags: list[float | None] = [1.0 if s in hit else None for s in steps]
    text = Text()
    for v in binned_max(flags, width):
        text.append(symbol if v else " ", style="bold magenta")
    return text
