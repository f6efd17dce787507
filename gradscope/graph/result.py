"""`GraphResult`: what `gradscope graph` drew, as a result every output reads (no torch)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gradscope.findings import Finding
from gradscope.graph.build import Drawing
from gradscope.outcome import Outcome


@dataclass(frozen=True)
class Probed:
    """What the probe pass (one forward and backward, as `inspect` runs it) found."""

    statuses: dict[str, str]
    """Each parameter's status word, as the colours show it."""
    findings: tuple[Finding, ...] = ()
    ignored: tuple[Finding, ...] = ()
    """Findings an `ignore` pattern of the settings silenced."""


@dataclass(frozen=True)
class GraphResult:
    """The drawing of a target's loss graph, and where it went (None: stdout)."""

    label: str
    drawing: Drawing
    path: str | None = None
    """The file written (None: the picture is `picture`, for stdout)."""
    picture: bytes = field(default=b"", repr=False)
    probed: Probed | None = None
    """None with --no-probe: every parameter drawn unjudged."""
    note: str = ""
    """What was built, where TARGET named a model class without a batch."""
    format: str = "dot"

    def outcome(self) -> Outcome:
        """The probe's findings, as `inspect` judges them; the exit code stays 0: a drawing
        is asked for to be looked at, and the colours are its verdict."""
        findings = list(self.probed.findings) if self.probed else []
        ignored = list(self.probed.ignored) if self.probed else []
        return Outcome("graph", self.label, findings, ignored, detail=self)

    def with_picture(self, picture: bytes) -> GraphResult:
        return dataclasses.replace(self, picture=picture)

    def lines(self) -> list[str]:
        """What was built and drawn, then what the picture had to leave out or collapse."""
        d = self.drawing
        where = f"wrote {self.path}" if self.path else "graph"
        what = (
            f"{d.nodes} nodes, one per module ({d.full_nodes} uncollapsed)"
            if d.collapsed
            else f"{d.nodes} nodes"
        )
        lines = [self.note] if self.note else []
        lines += [f"{where}: {what}", *d.notes]
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
            "format": self.format,
            "nodes": d.nodes,
            "full_nodes": d.full_nodes,
            "collapsed": d.collapsed,
            "absent": list(d.absent),
            "cuts": list(d.cuts),
            "parameters": dict(self.probed.statuses) if self.probed else None,
            "built": self.note or None,
            "notes": list(d.notes),
        }
