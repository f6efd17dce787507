"""The diff report for people: where the two models start to differ, by how much, where
that module is written, then the module outputs in forward order around that point.

Takes a DiffResult (gradscope/diff/result.py) and a View; prints nothing itself. Header,
fields, finding blocks and verdict are the shared layout (report/layout.py); module
names, paths and settings go through `styled`, never parsed as markup.
"""

from __future__ import annotations

from rich.console import Console

from gradscope import fmt
from gradscope.diff.findings import size
from gradscope.diff.result import DEFAULT_SOURCE, DiffResult, ModuleRow
from gradscope.findings import grouped
from gradscope.report import grid, layout
from gradscope.report.console import View, paint
from gradscope.report.text import Part, styled

BEFORE = 4
"""Rows shown before the first divergence, for context."""
LOSS_DIGITS = 6
"""A loss is shown to 6 significant digits: two close losses must read apart."""


def render(result: DiffResult, view: View) -> str:
    return paint(lambda console: _render(result, console, view), view)


def _render(result: DiffResult, console: Console, view: View) -> None:
    _header(result, console)
    console.print()
    _divergence(result, console)
    _table(result, console, view)
    _findings(result, console)
    _verdict(result, console)


def _say(console: Console, *parts: Part) -> None:
    """One paragraph under the divergence line, its wrapped lines indented further."""
    layout.line(console, "  ", *parts, hang=4)


def _header(r: DiffResult, console: Console) -> None:
    second = r.setting or r.new_label
    layout.header(console, "diff", f"{r.ref_label} {'with' if r.setting else 'vs'} {second}")
    t = r.tolerance
    if t.exact:
        rule = "bitwise (--exact)"
    elif t.source == DEFAULT_SOURCE:
        rule = f"per dtype, float32: rtol {t.rtol:g}, atol {t.atol:g} (gradients 10× rtol)"
    else:
        rule = f"rtol {t.rtol:g}, atol {t.atol:g} ({t.source})"
    passes = "2 passes" + (" + 2 seed-check forwards" if r.passes > 2 else "")
    layout.field(console, "tolerance", f"{rule} · {passes} · {fmt.duration(r.duration_s)}")
    a = r.alignment
    how: dict[str, int] = {}
    for _, _, h in a.pairs:
        how[h] = how.get(h, 0) + 1
    ways = ", ".join(f"{n} by {h}" for h, n in how.items()) or "0"
    strip = ""
    if a.prefixes != ("", ""):
        strip = f"; prefixes {a.prefixes[0] or '(none)'!r} ↔ {a.prefixes[1] or '(none)'!r}"
    layout.field(
        console,
        "paired",
        f"{ways}{strip}; {len(a.transposed)} transposed, {len(a.mismatched)} other shape, "
        f"{len(a.ref_only) + len(a.new_only)} unpaired",
    )
    for side, names in (("reference", a.modules_ref_only), ("new model", a.modules_new_only)):
        ran = _ran(r, names, side)
        if ran:
            layout.field(
                console,
                "unpaired",
                f"modules of the {side} without a partner that ran: "
                f"{fmt.clip(', '.join(ran), 120)}",
            )
    loss = f"ref {fmt.num(r.loss_ref, LOSS_DIGITS)}, new {fmt.num(r.loss_new, LOSS_DIGITS)}"
    if r.loss is not None and r.loss.max_abs:
        loss += f" (rel {fmt.num(r.loss.rel)})"
    layout.field(console, "loss", loss)


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
            layout.line(
                console,
                ("✗", "bold red"),
                " every module output agrees; the first differing gradient (backward order) is ",
                (p.new, "bold"),
                f": {size(p.grad)}",
            )
            console.print()
        return
    row = r.modules[r.origin]
    assert row.output is not None
    name = row.new if row.new is not None else row.ref
    layout.line(
        console, ("✗ the difference starts at ", "bold red"), (name, "bold"), f" ({row.kind})"
    )
    agree = "its inputs agree" if row.inputs is not None else "it takes no tensor input"
    _say(console, f"{agree}; its output differs: {size(row.output)}")
    if r.first_input is not None:
        inner = r.modules[r.first_input]
        _say(
            console,
            "inside it, the first submodule whose input differs is ",
            (inner.new or inner.ref, "bold"),
            ": look at its forward just before that call",
        )
    if row.settings:
        _say(console, ("settings differ", "bold"), f": {row.settings}")
    for side, made, where in (
        ("new", row.new_made, row.new_where),
        ("ref", row.ref_made, row.ref_where),
    ):
        if made:
            _say(console, f"{side}  created {made}")
        if where:
            _say(console, f"{side}  forward {where}")
    if r.first_grad is not None:
        p = r.params[r.first_grad]
        assert p.grad is not None
        _say(
            console,
            f"first differing gradient (backward order): {p.new}: "
            f"max abs {fmt.num(p.grad.max_abs)}, rel {fmt.num(p.grad.rel)}",
        )
    console.print()


def _status(i: int, row: ModuleRow, r: DiffResult) -> list[Part]:
    marks: list[Part] = []
    if row.new is None:
        marks.append(("no partner", "dim"))
    elif row.output is None:
        marks.append(("not run", "dim"))
    elif i == r.origin:
        marks.append(("◀ starts here", "bold red"))
    elif row.differs:
        marks.append(("differs", "red") if row.inputs_agree else "differs (input)")
    else:
        marks.append(("ok" if row.output.max_abs else "equal", "green"))
    if row.new_random:
        marks.append(("random (new)", "yellow"))
    if row.ref_random:
        marks.append(("random (ref)", "yellow"))
    out: list[Part] = []
    for mark in marks:
        out += [" ", mark] if out else [mark]
    return out


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
    columns = [
        grid.Column("#", right=True, style="dim"),
        grid.Column("module (forward order)"),
        grid.Column("max abs", right=True),
        grid.Column("rel", right=True),
        grid.Column(""),
    ]
    rows: list[list[Part]] = []
    for i in shown:
        row = r.modules[i]
        out = row.output
        rows.append(
            [
                str(i),
                row.label,
                "shape" if out and out.shape else fmt.num(out.max_abs if out else None),
                "" if out is None or out.shape else fmt.num(out.rel),
                styled(*_status(i, row, r)),
            ]
        )
    grid.grid(console, columns, rows, key=1)
    hidden_before, hidden_after = shown.start, len(r.modules) - shown.stop
    if hidden_before or hidden_after:
        layout.note(
            console,
            f"{hidden_before} module call(s) above and {hidden_after} below not shown "
            "(--all shows every one)",
        )


def _findings(r: DiffResult, console: Console) -> None:
    layout.findings_title(console, len(r.findings))
    for group in grouped(r.findings):
        layout.finding_block(console, group)


def _verdict(r: DiffResult, console: Console) -> None:
    outputs = sum(row.output is not None for row in r.modules)
    bad = sum(row.differs for row in r.modules)
    grads = sum(p.grad is not None for p in r.params)
    bad_grads = sum(bool(p.grad and p.grad.differs) for p in r.params)
    console.print()
    if r.differs:
        layout.verdict(
            console,
            "DIFFER",
            layout.style_of("DIFFER"),
            f"{bad} of {outputs} module outputs and {bad_grads} of {grads} gradients beyond "
            "tolerance",
        )
    else:
        how = "bitwise" if r.bitwise else "within tolerance"
        layout.verdict(
            console,
            "IDENTICAL",
            layout.style_of("IDENTICAL"),
            f"{how}: {outputs} module outputs, {grads} gradients",
        )
