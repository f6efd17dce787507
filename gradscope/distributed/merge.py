"""Per-rank records into one report that rank 0 writes (no torch).

A rank's record is a handful of numbers (steps taken, local gradient norm...);
the report shows one value where all ranks agree and a column per rank only
where they differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gradscope.findings import Finding
from gradscope.fmt import num


@dataclass(frozen=True)
class RankRecord:
    """What one rank knows about its own run."""

    rank: int
    forwards: int
    """Training forwards of the distributed model (grad enabled)."""
    steps: int
    """Optimizer steps taken."""
    local_grad_norm: float
    """L2 norm of this rank's own gradients before they were averaged across ranks."""
    grad_norm: float
    """L2 norm of the full gradients as the optimizer sees them (sharded ones summed)."""


@dataclass(frozen=True)
class Row:
    """One quantity: `value` when every rank agrees, else `per_rank`."""

    label: str
    value: Any = None
    per_rank: tuple[Any, ...] = ()


@dataclass
class DistReport:
    """The merged result of a distributed run, written by rank 0."""

    world: int
    backend: str
    layout: str
    """"DDP", "FSDP2" or "none" (a process group but no wrapped model seen)."""
    records: tuple[RankRecord, ...]
    findings: list[Finding] = field(default_factory=list)
    gatherings: int = 0
    collectives: int = 0
    died: str | None = None
    """The script's error, when it died."""

    def rows(self) -> list[Row]:
        return merge_rows(self.records)

    def summary(self) -> dict[str, Any]:
        """The run's shape and one entry per quantity, keyed by field name: a value where
        the ranks agree, a list by rank where they differ (watch's JSON `distributed`)."""
        return {
            "world": self.world,
            "backend": self.backend,
            "layout": self.layout,
            "gatherings": self.gatherings,
            "collectives": self.collectives,
            "ranks": {
                attr: (row.value if not row.per_rank else list(row.per_rank))
                for (attr, _), row in zip(LABELS, self.rows(), strict=False)  # none: no records
            },
        }


LABELS = (
    ("forwards", "training forwards"),
    ("steps", "optimizer steps"),
    ("local_grad_norm", "local grad norm (pre all-reduce)"),
    ("grad_norm", "grad norm (as last stepped)"),
)


def merge_rows(records: Sequence[RankRecord]) -> list[Row]:
    """One row per quantity; per-rank values only where ranks differ."""
    rows: list[Row] = []
    for attr, label in LABELS if records else ():
        values = tuple(getattr(r, attr) for r in sorted(records, key=lambda r: r.rank))
        same = all(_same(v, values[0]) for v in values)
        rows.append(Row(label, values[0]) if same else Row(label, per_rank=values))
    return rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b) or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return bool(a == b)


def render_text(report: DistReport) -> str:
    """The plain-text report (rank 0's stdout)."""
    lines = [
        f"gradscope distributed: {report.layout} on {report.world} ranks ({report.backend}), "
        f"{report.gatherings} gathering(s), {report.collectives} collective(s)"
    ]
    if report.died:
        lines.append(f"the script died: {report.died}")
    rows = report.rows()
    differ = [r for r in rows if r.per_rank]
    if differ:
        head = "".join(f"{'rank ' + str(i):>14}" for i in range(report.world))
        lines.append(f"{'per rank (where ranks differ)':34}{head}")
        for r in differ:
            lines.append(f"  {r.label:32}" + "".join(f"{_fmt(v):>14}" for v in r.per_rank))
    for r in rows:
        if not r.per_rank:
            lines.append(f"  {r.label:32}{_fmt(r.value):>14}  (all ranks)")
    if not report.findings:
        lines.append("no distributed findings")
    for f in report.findings:
        lines.append(f"{f.severity}: {f.rule} {f.slug} {f.subject}: {f.message}")
        for e in f.evidence:
            lines.append(f"    {e}")
        lines.append(f"    fix: {f.advice}")
    return "\n".join(lines) + "\n"


def _fmt(v: Any) -> str:
    return num(v, 6) if isinstance(v, float) else str(v)
