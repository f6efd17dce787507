"""The diff report for people: where the two models start to differ, by how much, where
that module is written, then the module outputs in forward order around that point.

Takes a DiffResult (gradscope/diff/result.py) and a View; prints nothing itself.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from gradscope import fmt
from gradscope.diff.findings import size
from gradscope.diff.result import DEFAULT_SOURCE, DiffResult, ModuleRow
from gradscope.findings import Severity
from gradscope.report.console import View, paint

BEFORE = 4
"""Rows shown before the first divergence, for context."""

_SEVERITY = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}


def render(result: DiffResult, view: View) -> str:
    text = paint(lambda console: _render(result, console, view), view)
    return "\n".join(line.rstrip() for line in text.split("\n"))


def _render(result: DiffResult, console: Console, view: View) -> None:
    _header(result, console)
    console.print()
    _divergence(result, console)
    _table(result, console, view)
    _findings(result, console)
    _verdict(result, console)


def _say(console: Console, markup: str, indent: int = 2) -> None:
    """One paragraph whose wrapped lines keep its indent."""
    console.print(Padding(Text.from_markup(markup), (0, 0, 0, indent), expand=False))


def _header(r: DiffResult, console: Console) -> None:
    console.print(f"[bold]gradscope diff[/]  ref  {escape(r.ref_label)}")
    second = r.setting or r.new_label
    console.print(f"                {'with' if r.setting else 'new '} {escape(second)}")
    t = r.tolerance
    if t.exact:
        rule = "bitwise (--exact)"
    elif t.source == DEFAULT_SOURCE:
        rule = f"per dtype, float32: rtol {t.rtol:g}, atol {t.atol:g} (gradients 10× rtol)"
    else:
        rule = f"rtol {t.rtol:g}, atol {t.atol:g} ({escape(t.source)})"
    passes = "2 passes" + (" + 2 seed-check forwards" if r.passes > 2 else "")
    _say(console, f"[dim]tolerance {rule} · {passes} · {r.duration_s:.2f} s[/]", 0)
    a = r.alignment
    how: dict[str, int] = {}
    for _, _, h in a.pairs:
        how[h] = how.get(h, 0) + 1
    ways = ", ".join(f"{n} by {h}" for h, n in how.items()) or "0"
    strip = ""
    if a.prefixes != ("", ""):
        strip = f"; prefixes {a.prefixes[0] or '(none)'!r} ↔ {a.prefixes[1] or '(none)'!r}"
    _say(
        console,
        f"[dim]parameters paired: {escape(ways)}{escape(strip)}; {len(a.transposed)} "
        f"transposed, {len(a.mismatched)} other shape, "
        f"{len(a.ref_only) + len(a.new_only)} unpaired[/]",
        0,
    )
    for side, names in (("reference", a.modules_ref_only), ("new model", a.modules_new_only)):
        ran = _ran(r, names, side)
        if ran:
            _say(
                console,
                f"[dim]modules of the {side} without a partner that ran: "
                f"{escape(fmt.clip(', '.join(ran), 120))}[/]",
                0,
            )
    loss = f"loss: ref {r.loss_ref:.6g}, new {r.loss_new:.6g}"
    if r.loss is not None and r.loss.max_abs:
        loss += f" (rel {fmt.num(r.loss.rel)})"
    console.print(f"[dim]{loss}[/]")


def _ran(r: DiffResult, names: tuple[str, ...], side: str) -> list[str]:
    """Unpaired modules that took part in the forward (containers and unused ones aside)."""
    if side == "reference":
        seen = {row.ref for row in r.modules}
        return [n for n in names if n in seen]
    return [n for n in names if n in set(r.new_ran)]


def _divergence(r: DiffResult, console: Console) -> None:
    if r.origin is None:
        if r.first_grad is not None:
            p = r.params[r.first_grad]
            assert p.grad is not None
            console.print(
                f"[bold red]✗[/] every module output agrees; the first differing gradient "
                f"(backward order) is [bold]{escape(p.new)}[/]: {escape(size(p.grad))}"
            )
            console.print()
        return
    row = r.modules[r.origin]
    assert row.output is not None
    name = row.new if row.new is not None else row.ref
    console.print(
        f"[bold red]✗ the difference starts at[/] [bold]{escape(name)}[/] ({escape(row.kind)})"
    )
    agree = "its inputs agree" if row.inputs is not None else "it takes no tensor input"
    _say(console, f"{agree}; its output differs: {escape(size(row.output))}")
    if r.first_input is not None:
        inner = r.modules[r.first_input]
        _say(
            console,
            f"inside it, the first submodule whose input differs is "
            f"[bold]{escape(inner.new or inner.ref)}[/]: look at its forward just before "
            "that call",
        )
    if row.settings:
        _say(console, f"[bold]settings differ[/]: {escape(row.settings)}")
    for side, made, where in (
        ("new", row.new_made, row.new_where),
        ("ref", row.ref_made, row.ref_where),
    ):
        if made:
            _say(console, f"{side}  created {escape(made)}")
        if where:
            _say(console, f"{side}  forward {escape(where)}")
    if r.first_grad is not None:
        p = r.params[r.first_grad]
        assert p.grad is not None
        _say(
            console,
            f"first differing gradient (backward order): {escape(p.new)}: "
            f"max abs {fmt.num(p.grad.max_abs)}, rel {fmt.num(p.grad.rel)}",
        )
    console.print()


def _status(i: int, row: ModuleRow, r: DiffResult) -> str:
    marks = []
    if row.new is None:
        marks.append("[dim]no partner[/]")
    elif row.output is None:
        marks.append("[dim]not run[/]")
    elif i == r.origin:
        marks.append("[bold red]◀ starts here[/]")
    elif row.differs:
        marks.append("[red]differs[/]" if row.inputs_agree else "differs (input)")
    else:
        marks.append("[green]ok[/]" if row.output.max_abs else "[green]equal[/]")
    if row.new_random:
        marks.append("[yellow]random (new)[/]")
    if row.ref_random:
        marks.append("[yellow]random (ref)[/]")
    return " ".join(marks)


def _window(r: DiffResult, view: View) -> range:
    total = len(r.modules)
    if view.top is None or total <= view.top:
        return range(total)
    anchor = r.origin
    if anchor is None:  # nothing differs: around the largest difference
        rels = [row.output.rel if row.output else -1.0 for row in r.modules]
        anchor = rels.index(max(rels))
    start = max(0, min(anchor - BEFORE, total - view.top))
    return range(start, min(total, start + view.top))


def _table(r: DiffResult, console: Console, view: View) -> None:
    shown = _window(r, view)
    table = Table(box=None, padding=(0, 1), show_edge=False, title_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("module (forward order)", overflow="fold")
    table.add_column("max abs", justify="right")
    table.add_column("rel", justify="right")
    table.add_column("", overflow="fold")
    for i in shown:
        row = r.modules[i]
        out = row.output
        table.add_row(
            str(i),
            escape(row.label),
            "shape" if out and out.shape else fmt.num(out.max_abs if out else None),
            "" if out is None or out.shape else fmt.num(out.rel),
            _status(i, row, r),
        )
    console.print(table)
    hidden_before, hidden_after = shown.start, len(r.modules) - shown.stop
    if hidden_before or hidden_after:
        console.print(
            f"[dim]{hidden_before} module call(s) above and {hidden_after} below not shown "
            "(--all shows every one)[/]"
        )
    console.print()


def _findings(r: DiffResult, console: Console) -> None:
    for f in r.findings:
        colour = _SEVERITY[f.severity]
        console.print(
            f"[{colour}]{f.severity}[/] [dim]{f.rule} {f.slug}[/] {escape(f.subject)}",
        )
        _say(console, escape(f.message))
        for e in f.evidence:
            _say(console, f"[dim]{escape(e)}[/]")
        _say(console, f"→ {escape(f.advice)}")
    if r.findings:
        console.print()


def _verdict(r: DiffResult, console: Console) -> None:
    outputs = sum(row.output is not None for row in r.modules)
    bad = sum(row.differs for row in r.modules)
    grads = sum(p.grad is not None for p in r.params)
    bad_grads = sum(bool(p.grad and p.grad.differs) for p in r.params)
    counts = f"{bad} of {outputs} module outputs and {bad_grads} of {grads} gradients"
    if r.differs:
        console.print(f"[bold red]differ[/]: {counts} beyond tolerance")
    else:
        console.print(f"[bold green]{r.verdict()}[/]: {outputs} module outputs, {grads} gradients")
