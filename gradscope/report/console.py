"""How terminal text is laid out and painted: a View, and rich painting into a string."""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from gradscope.report.write import to_stdout


@dataclass(frozen=True)
class View:
    """How terminal text is laid out: columns, colour, and how many table rows."""

    width: int = 120
    color: bool = False
    top: int | None = 30


def view_for(output: str | None, width: int | None = None, top: int | None = 30) -> View:
    """A terminal gets its own width and colour; a pipe or a file 120 columns, plain."""
    if not to_stdout(output):
        return View(width or 120, False, top)
    tty = sys.stdout.isatty()
    color = (tty or "FORCE_COLOR" in os.environ) and "NO_COLOR" not in os.environ
    if width is None:
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) > 0:
            width = int(columns)
        else:
            width = shutil.get_terminal_size((120, 24)).columns if tty else 120
    return View(width, color, top)


def paint(draw: Callable[[Any], None], view: View) -> str:
    """Run `draw(console)` on a rich Console that records into a string; no line keeps
    trailing spaces (a table pads its cells)."""

    console = Console(
        file=io.StringIO(),
        width=view.width,
        force_terminal=view.color,
        color_system="standard" if view.color else None,
        highlight=False,
        emoji=False,
    )
    draw(console)
    text = str(console.file.getvalue())  # type: ignore[attr-defined]
    return "\n".join(line.rstrip(" ") for line in text.split("\n"))
