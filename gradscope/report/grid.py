"""A table that fits the console or becomes a list: no cell is ever cut short.

rich's Table shrinks columns that do not fit and cuts their words ("constan…" for
"constant-factor"), which loses exactly the words a reader looks for. A grid is drawn
as aligned columns when every cell fits whole; below that width each row becomes a
line of its first cell and an indented "title value · title value" paragraph.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.text import Text

from gradscope.report.layout import paragraph
from gradscope.report.text import Part, styled

GAP = 2
"""Spaces between two columns."""
LIST_INDENT = 4
"""How far a row's other cells sit under its first in the list layout."""


@dataclass(frozen=True)
class Column:
    title: str
    right: bool = False
    """Numbers are right-aligned, words left."""
    style: str = ""
    """The style of every cell of the column (a cell's own style adds to it)."""
    priority: int = 0
    """Where a table gives up columns to fit (the inspect table's), lower goes first."""


def grid(
    console: Console,
    columns: list[Column],
    rows: list[list[Part]],
    indent: int = 2,
    key: int = 0,
) -> None:
    """Print `rows` (one Part per column) as a table if it fits, else as a list whose
    entries start with the cell of column `key`."""
    cells = [[_cell(part, col) for part, col in zip(row, columns, strict=True)] for row in rows]
    widths = [
        max([len(col.title)] + [row[i].cell_len for row in cells]) for i, col in enumerate(columns)
    ]
    if indent + sum(widths) + GAP * (len(widths) - 1) <= console.width:
        _table(console, columns, cells, widths, indent)
    else:
        _list(console, columns, cells, indent, key)


def _cell(part: Part, col: Column) -> Text:
    text = styled(part, style=col.style)
    if "\n" in text.plain:  # a cell is one line: a newline in a name is shown, not obeyed
        text = Text(text.plain.replace("\n", "\\n"), style=col.style)
    return text


def _table(
    console: Console, columns: list[Column], cells: list[list[Text]], widths: list[int], indent: int
) -> None:
    head = [Text(col.title, style="bold") for col in columns]
    for row in [head, *cells]:
        out = Text(" " * indent)
        for i, (cell, col) in enumerate(zip(row, columns, strict=True)):
            pad = " " * (widths[i] - cell.cell_len)
            out.append_text(Text(pad) + cell if col.right else cell + Text(pad))
            if i < len(columns) - 1:
                out.append(" " * GAP)
        out.rstrip()
        console.print(out, soft_wrap=True)


def _list(
    console: Console, columns: list[Column], cells: list[list[Text]], indent: int, key: int
) -> None:
    for row in cells:
        paragraph(console, row[key], indent, LIST_INDENT)
        rest = Text()
        for i, (cell, col) in enumerate(zip(row, columns, strict=True)):
            if i == key or not cell.plain:
                continue
            if rest.plain:
                rest.append(" · ", style="dim")
            rest.append(f"{col.title} " if col.title else "", style="dim")
            rest.append_text(cell)
        if rest.plain:
            paragraph(console, rest, indent + LIST_INDENT)
