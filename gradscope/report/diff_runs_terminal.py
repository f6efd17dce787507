"""The diff of two runs for people: the tolerance, where the runs part, the parameters
that part first, how the gap grows, whether each run trained, the findings, the verdict.

Takes a RunsDiff (gradscope/diff/runs/result.py) and a View; prints nothing itself. Every
name and path is plain `Text`, never parsed as markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradscope import fmt
from gradscope.diff.runs.result import RunsDiff
from gradscope.findings import Severity
from gradscope.report.console import View, paint

_SEVERITY = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}
PARTING_ROWS = 8
"""Parameters listed in the first-to-part table (the JSON has them all)."""


def render(result: RunsDiff, view: View) -> str:
    text = paint(lambda console: _render(result, console), view)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _render(r: RunsDiff, console: Console) -> None:
    _header(r, console)
    console.print()
    if r.could_not_run:
        _say(console, Text(r.could_not_run, style="red"), 0)
        return
    _divergence(r, console)
    _training(r, console)
    _findings(r, console)
    _verdict(r, console)


def _say(console: Console, text: Text, indent: int = 2) -> None:
    """One paragraph whose wrapped lines keep its indent."""
    console.print(Padding(text, (0, 0, 0, indent), expand=False))


def _steps(lengths: dict[int, int]) -> str:
    return " + ".join(str(n) for n in lengths.values())


def _header(r: RunsDiff, console: Console) -> None:
    for word, label in (("ref", r.ref_label), ("new", r.new_label)):
        line = Text("gradscope diff  " if word == "ref" else " " * 16)
        if word == "ref":
            line.stylize("bold", 0, 14)
        line.append(f"{word}  ")
        line.append(fmt.printable(label))
        console.print(line)
    t = r.tolerance
    rule = (
        "bitwise (--exact)"
        if t.exact
        else f"rtol {t.rtol:g}, atol {t.atol:g} on losses and gradient norms: {t.source}"
    )
    compared = sum(r.common.values())
    steps = (
        f"steps: ref {_steps(r.lengths['ref'])} (to {r.last_steps['ref']}), new "
        f"{_steps(r.lengths['new'])} (to {r.last_steps['new']}), {compared} compared"
    )
    how: dict[str, int] = {}
    for _, _, h in r.pairs:
        how[h] = how.get(h, 0) + 1
    kinds = ", ".join(f"{n} by {h}" for h, n in how.items())
    pairs = f"parameters: {len(r.pairs)} paired" + (f" ({kinds})" if kinds else "")
    if r.prefixes != ("", ""):
        pairs += f", prefixes {r.prefixes[0] or '-'} / {r.prefixes[1] or '-'}"
    if r.ref_only or r.new_only:
        pairs += f"; {len(r.ref_only)} ref-only, {len(r.new_only)} new-only"
    for said in (f"tolerance {rule}", steps, pairs, *r.notes):
        _say(console, Text(fmt.printable(said), style="dim"), 0)


def _divergence(r: RunsDiff, console: Console) -> None:
    first = r.first
    if first is None:
        console.print(Text(f"No step differs beyond the tolerance: {r.verdict()}.", style="bold"))
        console.print()
        return
    head = Text("The runs part at step ", style="bold")
    head.append(str(first.step))
    if first.optimizer:
        head.append(f" (optimizer {first.optimizer})")
    head.append(".")
    console.print(head)
    for d in r.divergences[1:]:
        _say(console, Text(f"optimizer {d.optimizer}: at step {d.step}"))
    if r.lr_differs is not None and r.lr_differs[1] <= first.step:
        _, step, a, b = r.lr_differs
        said = f"learning rates differ from step {step}: "
        said += f"{', '.join(map(fmt.num, a))} vs {', '.join(map(fmt.num, b))}"
        _say(console, Text(said))
    console.print()
    _parting(r, console)
    _growth(r, console)


def _parting(r: RunsDiff, console: Console) -> None:
    first = r.first
    assert first is not None
    scalars = [g for g in first.gaps if g.subject in ("loss", "grad_norm")]
    table = Table(box=None, pad_edge=False, padding=(0, 1), show_edge=False)
    for name, justify in (("step", "right"), ("parts first", "left"), ("ref", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("new", justify="right")
    table.add_column("rel", justify="right")
    rows = [(p.step, p.new, p.gap) for p in r.parting[:PARTING_ROWS]]
    rows += [(first.step, g.subject, g) for g in scalars]
    rows.sort(key=lambda row: (row[0], -row[2].ratio))
    for step, name, g in rows:
        table.add_row(
            str(step),
            Text(fmt.clip(name, 36)),
            fmt.num(g.ref_value, 6),
            fmt.num(g.new_value, 6),
            Text(fmt.num(g.rel), style="red" if g.ratio > 1 else ""),
        )
    console.print(Padding(table, (0, 0, 0, 2)))
    hidden = len(r.parting) - min(len(r.parting), PARTING_ROWS)
    if hidden:
        _say(console, Text(f"... {hidden} more parameter(s) part later (-f json lists them)"))
    console.print()


def _growth(r: RunsDiff, console: Console) -> None:
    if not r.growth:
        return
    first, *later = r.growth
    parts = [f"{fmt.num(first.rel)} at step {first.step}"]
    for g in later:
        size = fmt.num(g.rel) if g.factor is None else f"×{fmt.num(g.factor)}"
        parts.append(f"{size} by step {g.step}")
    text = Text("the gap (largest relative difference): ", style="bold")
    text.append(parts[0] + (", then " + ", ".join(parts[1:]) if later else ""), style="")
    _say(console, text, 0)
    console.print()


def _training(r: RunsDiff, console: Console) -> None:
    console.print(Text("trained at all", style="bold"))
    for t in r.training:
        label = r.ref_label if t.run == "ref" else r.new_label
        word, style = {True: ("yes", "green"), False: ("NO", "red"), None: ("?", "yellow")}[
            t.trained
        ]
        line = Text(f"{t.run}  ")
        if t.optimizer or len(r.lengths[t.run]) > 1:
            line.append(f"optimizer {t.optimizer}  ")
        line.append(word, style=f"bold {style}")
        line.append(f"  {fmt.printable(t.why)}  ")
        line.append(fmt.clip(label, 30), style="dim")
        _say(console, line)
    console.print()


def _findings(r: RunsDiff, console: Console) -> None:
    shown = [f for f in r.findings if f.ignored_by is None]
    for f in shown:
        line = Text(str(f.severity), style=_SEVERITY[f.severity])
        line.append(f" {f.rule} {f.slug} ", style="dim")
        line.append(fmt.printable(f.subject))
        console.print(line)
        _say(console, Text(fmt.printable(f.message)))
        for e in f.evidence:
            _say(console, Text(fmt.printable(e), style="dim"))
        _say(console, Text("→ " + fmt.printable(f.advice)))
    ignored = len(r.findings) - len(shown)
    if ignored:
        _say(console, Text(f"{ignored} finding(s) ignored by the config", style="dim"), 0)
    if r.findings:
        console.print()


def _verdict(r: RunsDiff, console: Console) -> None:
    compared = sum(r.common.values())
    untrained = [t.run for t in r.training if t.trained is False]
    line = Text(r.verdict(), style="bold red" if r.differs else "bold green")
    line.append(f": {compared} common steps")
    if r.first is not None:
        line.append(f", first beyond tolerance at step {r.first.step}")
    if untrained:
        line.append("; did not train: ", style="")
        line.append(", ".join(dict.fromkeys(untrained)), style="bold red")
    console.print(line)
