"""The diff of two runs for people: the tolerance, where the runs part, the parameters
that part first, how the gap grows, whether each run trained, the findings, the verdict.

Takes a RunsDiff (gradscope/diff/runs/result.py) and a View; prints nothing itself. Header,
fields, parting table, finding blocks and verdict are the shared layout (report/layout.py,
report/grid.py), as the model diff's; parameter names, paths and notes go through
`styled`, never parsed as markup.
"""

from __future__ import annotations

from rich.console import Console

from gradscope import fmt
from gradscope.diff.runs.result import RunsDiff
from gradscope.findings import Finding, ignored_summary, split_ignored
from gradscope.report import grid, layout
from gradscope.report.console import View, paint
from gradscope.report.text import Part

PARTING_ROWS = 8
"""Parameters listed in the first-to-part table (the JSON has them all)."""
VALUE_DIGITS = 6
"""A logged loss or norm is shown to 6 significant digits: two close values must read apart."""
LABEL_WIDTH = 40
"""A run's log path beside its trained-at-all line is cut in its middle past this: a
reminder of which run is which, the header names it whole."""
TRAINED = {True: "yes", False: "NO", None: "?"}


def render(result: RunsDiff, view: View) -> str:
    return paint(lambda console: _render(result, console), view)


def _render(r: RunsDiff, console: Console) -> None:
    _header(r, console)
    console.print()
    if r.could_not_run:
        layout.verdict(console, "NOT COMPARED", layout.style_of("NOT COMPARED"), r.could_not_run)
        return
    _divergence(r, console)
    _training(r, console)
    _findings(r, console)
    _verdict(r, console)


def _say(console: Console, *parts: Part) -> None:
    """One paragraph under a section's first line, its wrapped lines indented further."""
    layout.line(console, "  ", *parts, hang=4)


def _steps(lengths: dict[int, int]) -> str:
    return " + ".join(str(n) for n in lengths.values())


def _header(r: RunsDiff, console: Console) -> None:
    layout.header(console, "diff", r.label)
    t = r.tolerance
    rule = (
        "bitwise (--exact)"
        if t.exact
        else f"rtol {t.rtol:g}, atol {t.atol:g} on losses and gradient norms: {t.source}"
    )
    layout.field(console, "tolerance", rule)
    compared = sum(r.common.values())
    layout.field(
        console,
        "steps",
        f"ref {_steps(r.lengths['ref'])} (to step {r.last_steps['ref']}), new "
        f"{_steps(r.lengths['new'])} (to step {r.last_steps['new']}); {compared} compared",
    )
    how: dict[str, int] = {}
    for _, _, h in r.pairs:
        how[h] = how.get(h, 0) + 1
    kinds = ", ".join(f"{n} by {h}" for h, n in how.items())
    paired = f"{len(r.pairs)} parameters" + (f" ({kinds})" if kinds else "")
    if r.prefixes != ("", ""):
        paired += f"; prefixes {r.prefixes[0] or '(none)'!r} ↔ {r.prefixes[1] or '(none)'!r}"
    if r.ref_only or r.new_only:
        paired += f"; {len(r.ref_only)} ref-only, {len(r.new_only)} new-only"
    layout.field(console, "paired", paired)
    for i, note in enumerate(r.notes):
        layout.field(console, "" if i else "notes", (note, "dim"))


def _divergence(r: RunsDiff, console: Console) -> None:
    first = r.first
    if first is None:
        how = "bitwise" if r.bitwise else "within the tolerance"
        layout.line(console, ("✓", "bold green"), f" every compared step agrees, {how}")
        console.print()
        return
    where = f" (optimizer {first.optimizer})" if first.optimizer else ""
    layout.line(console, ("✗ the runs part at step ", "bold red"), (str(first.step), "bold"), where)
    for d in r.divergences:
        if d is not first:
            _say(console, f"optimizer {d.optimizer} parts at step {d.step}")
    if r.lr_differs is not None and r.lr_differs[1] <= first.step:
        _, step, a, b = r.lr_differs
        _say(
            console,
            f"learning rates differ from step {step}: "
            f"{', '.join(map(fmt.num, a))} vs {', '.join(map(fmt.num, b))}",
        )
    _growth(r, console)
    console.print()
    _parting(r, console)
    console.print()


def _parting(r: RunsDiff, console: Console) -> None:
    """The parameters that part first, with the loss and total norm at the first step:
    ranked by step, then by how far beyond the tolerance."""
    first = r.first
    assert first is not None
    scalars = [g for g in first.gaps if g.subject in ("loss", "grad_norm")]
    ranked = [(p.step, p.new, p.gap) for p in r.parting[:PARTING_ROWS]]
    ranked += [(first.step, g.subject, g) for g in scalars]
    ranked.sort(key=lambda row: (row[0], -row[2].ratio))
    columns = [
        grid.Column("step", right=True, style="dim"),
        grid.Column("parts first"),
        grid.Column("ref", right=True),
        grid.Column("new", right=True),
        grid.Column("rel", right=True),
    ]
    rows: list[list[Part]] = [
        [
            str(step),
            name,
            fmt.num(g.ref_value, VALUE_DIGITS),
            fmt.num(g.new_value, VALUE_DIGITS),
            (fmt.num(g.rel), "red" if g.ratio > 1 else ""),
        ]
        for step, name, g in ranked
    ]
    grid.grid(console, columns, rows, key=1)
    hidden = len(r.parting) - min(len(r.parting), PARTING_ROWS)
    if hidden:
        layout.note(console, f"{hidden} more parameter(s) part later (-f json lists them)")


def _growth(r: RunsDiff, console: Console) -> None:
    if not r.growth:
        return
    first, *later = r.growth
    said = f"{fmt.num(first.rel)} at step {first.step}"
    then = [
        f"{fmt.num(g.rel) if g.factor is None else '×' + fmt.num(g.factor)} by step {g.step}"
        for g in later
    ]
    if then:
        said += ", then " + ", ".join(then)
    _say(console, "the gap (largest relative difference): ", said)


def _training(r: RunsDiff, console: Console) -> None:
    """Each run judged by itself: did its weights move and its loss fall."""
    layout.line(console, ("Trained at all", "bold"))
    for t in r.training:
        word = TRAINED[t.trained]
        style = layout.style_of(word)
        which: list[Part] = [f"  {t.run}  "]
        if t.optimizer or len(r.lengths[t.run]) > 1:
            which.append(f"optimizer {t.optimizer}  ")
        label = r.ref_label if t.run == "ref" else r.new_label
        layout.line(
            console,
            *which,
            (word.ljust(3), style),
            f"  {t.why} · ",
            (fmt.clip(label, LABEL_WIDTH), "dim"),
            hang=7,
        )


def _findings(r: RunsDiff, console: Console) -> None:
    """Each rule's findings of one severity as one block; a block of several lists every
    finding's own message: a divergence per optimizer, a verdict per run, each differs."""
    shown, ignored = split_ignored(r.findings)
    ignored += [f for f in r.ignored if f not in ignored]
    layout.findings_title(console, len(shown))
    blocks: dict[tuple[int, str], list[Finding]] = {}
    for f in sorted(shown, key=lambda f: (-f.severity, f.rule)):
        blocks.setdefault((f.severity, f.rule), []).append(f)
    for group in blocks.values():
        layout.finding_block(console, group, each=len(group) > 1)
    if ignored:
        said = ignored_summary(ignored) + " by the config: in --format json, not failing"
        layout.note(console, said, indent=layout.DETAIL if shown else 2)


def _verdict(r: RunsDiff, console: Console) -> None:
    compared = sum(r.common.values())
    untrained = list(dict.fromkeys(t.run for t in r.training if t.trained is False))
    why: list[Part] = []
    if r.first is not None:
        parting = len({p.ref for p in r.parting})
        why.append(
            f"first beyond tolerance at step {r.first.step} of {compared} compared; "
            f"{parting} of {len(r.pairs)} parameters part"
        )
    else:
        how = "bitwise" if r.bitwise else "within tolerance"
        why.append(f"{how} over {compared} compared steps")
    if untrained:
        why += ["; did not train: ", (", ".join(untrained), "bold red")]
    console.print()
    if r.differs:
        layout.verdict(console, "DIFFER", layout.style_of("DIFFER"), *why)
    else:
        layout.verdict(console, "IDENTICAL", layout.style_of("IDENTICAL"), *why)
