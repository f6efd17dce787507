"""`GraphResult`: what `gradscope graph` drew, as a result every output reads (no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradscope.graph.build import Drawing
from gradscope.outcome import Outcome


@dataclass(frozen=True)
class GraphResult:
    """The drawing of a target's loss graph, and where it went (None: stdout)."""

    label: str
    drawing: Drawing
    path: str | None = None
    """The file written (None: the picture is `picture`, for stdout)."""
    picture: bytes = field(default=b"", repr=False)

    def outcome(self) -> Outcome:
        """A drawing has no findings: the colours are the verdict, exit 0."""
        return Outcome("graph", self.label, detail=self)

    def lines(self) -> list[str]:
        """What was drawn, then what the picture had to leave out or collapse."""
        d = self.drawing
        where = f"wrote {self.path}" if self.path else "graph"
        what = (
            f"{d.nodes} nodes, one per module ({d.full_nodes} uncollapsed)"
            if d.collapsed
            else f"{d.nodes} nodes"
        )
        lines = [f"{where}: {what}", *d.notes]
        if d.absent:
            lines.append(
                f"{len(d.absent)} parameters have no grad (listed in the legend): "
                + ", ".join(a.split(" ")[0] for a in d.absent[:5])
                + (" ..." if len(d.absent) > 5 else "")
            )
        return lines

    def body(self) -> dict[str, Any]:
        d = self.drawing
        return {
            "target": self.label,
            "output": self.path,
            "nodes": d.nodes,
            "full_nodes": d.full_nodes,
            "collapsed": d.collapsed,
            "absent": list(d.absent),
            "notes": list(d.notes),
        }
