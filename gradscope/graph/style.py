"""The picture's vocabulary: status colours, node labels and the legend.

In one place so that docs/graph.md, the full graph and the collapsed graph
agree. torchviz's conventions are kept where they do not clash: grey backward
ops, blue leaves, green output. No torch here.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# graphviz is imported in functions: `gradscope --help` must not load it


@dataclass(frozen=True)
class Swatch:
    colour: str
    """A Graphviz fill colour."""
    meaning: str
    """The legend's words for it."""


STATUS: dict[str, Swatch] = {
    "non-finite": Swatch("#ff5c5c", "non-finite grad (NaN or Inf)"),
    "exploding": Swatch("#ffa23e", "exploding grad"),
    "vanishing": Swatch("#ffe45c", "vanishing grad"),
    "zero": Swatch("#fff4b8", "all-zero grad (dead units)"),
    "ok": Swatch("#add8e6", "healthy grad"),
}
"""Probe status → colour of a parameter (or of the module that owns it), worst first."""

UNPROBED = Swatch("#add8e6", "parameter (not probed: --no-probe)")
OP = Swatch("lightgrey", "backward op")
OUTPUT = Swatch("darkolivegreen1", "the loss")
SAVED = Swatch("#f1d9b5", "saved tensor (torchviz draws these orange)")
MODULE = Swatch("#e8e8e8", "module without parameters (op count inside)")
INPUT = Swatch("#d9ecf2", "input leaf that requires grad")

LEGEND_MAX_NAMES = 12
"""Parameters listed by name per legend row; the rest are counted."""

NODE_ATTR = dict(
    style="filled", shape="box", align="left", fontsize="10", height="0.2", fontname="monospace"
)
GRAPH_ATTR = dict(ranksep="0.3", nodesep="0.25")


def worst(statuses: Iterable[str | None]) -> str | None:
    """The most alarming status of a group (None when nothing was probed)."""
    order = list(STATUS)
    known = [s for s in statuses if s in STATUS]
    return min(known, key=order.index) if known else None


def param_swatch(status: str | None) -> Swatch:
    return STATUS.get(status or "", UNPROBED)


def shape_text(shape: Sequence[int]) -> str:
    return str(tuple(int(s) for s in shape))


def param_label(
    name: str, shape: Sequence[int], status: str | None, aliases: Sequence[str] = ()
) -> str:
    """Name (and tied names), shape, and the status in words when it is not healthy."""
    lines = [name, *(f"= {a}" for a in aliases), shape_text(shape)]
    if status and status != "ok":
        lines.append(status)
    return "\n".join(lines)


def _names(items: Sequence[str]) -> str:
    shown = [html.escape(i) for i in items[:LEGEND_MAX_NAMES]]
    if len(items) > LEGEND_MAX_NAMES:
        shown.append(f"… and {len(items) - LEGEND_MAX_NAMES} more")
    return '<BR ALIGN="LEFT"/>'.join(shown) + '<BR ALIGN="LEFT"/>'


def _wrapped(text: str, width: int = 48) -> str:
    return (
        '<BR ALIGN="LEFT"/>'.join(html.escape(line) for line in textwrap.wrap(text, width))
        + '<BR ALIGN="LEFT"/>'
    )


def legend(
    title: str,
    swatches: Sequence[Swatch],
    absent: Sequence[str],
    frozen: Sequence[str],
    notes: Sequence[str],
) -> str:
    """An HTML-like Graphviz label: colours, then the parameters the picture cannot show."""
    rows = [f'<TR><TD COLSPAN="2" ALIGN="LEFT"><B>{_wrapped(title)}</B></TD></TR>']
    rows += [
        f'<TR><TD BGCOLOR="{s.colour}" WIDTH="18"> </TD>'
        f'<TD ALIGN="LEFT">{html.escape(s.meaning)}</TD></TR>'
        for s in swatches
    ]
    if absent:
        rows.append(
            f'<TR><TD COLSPAN="2" ALIGN="LEFT">grad is None, not in this graph '
            f'({len(absent)}):<BR ALIGN="LEFT"/>{_names(absent)}</TD></TR>'
        )
    if frozen:
        rows.append(
            f'<TR><TD COLSPAN="2" ALIGN="LEFT">frozen, requires_grad=False '
            f'({len(frozen)}):<BR ALIGN="LEFT"/>{_names(frozen)}</TD></TR>'
        )
    rows += [f'<TR><TD COLSPAN="2" ALIGN="LEFT">{_wrapped(n)}</TD></TR>' for n in notes]
    return (
        '<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
        + "".join(rows)
        + "</TABLE>>"
    )


def new_digraph() -> Any:
    import graphviz

    return graphviz.Digraph(node_attr=NODE_ATTR, graph_attr=GRAPH_ATTR)


def output_node(dot: Any, loss: Any, source: str | None) -> None:
    dot.node("loss", f"loss\n{shape_text(loss.shape)}", fillcolor=OUTPUT.colour)
    if source is not None:
        dot.edge(source, "loss")


CUT_COLOUR = "#d62728"
CUT_ATTR = {"shape": "box", "style": "dashed", "color": CUT_COLOUR, "fontcolor": CUT_COLOUR}
"""Where the forward cut the graph (.detach(), .data, no_grad): not an autograd node, so
drawn unfilled and dashed."""
