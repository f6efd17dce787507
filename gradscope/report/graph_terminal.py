"""`gradscope graph`'s own lines: what was drawn and what the picture left out (stderr,
since stdout may carry the picture)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradscope.fmt import printable
from gradscope.report.console import View

if TYPE_CHECKING:
    from gradscope.graph.result import GraphResult


def render(result: GraphResult, view: View) -> str:
    return "".join(f"gradscope: {printable(line)}\n" for line in result.lines())
