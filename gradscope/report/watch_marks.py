"""Steps worth marking in the views, each tied to the finding that explains it. No torch.

The steps come from the findings themselves (`Finding.steps`, filled by the rules that
are about particular steps), so a view marks exactly what a finding says and never
judges the run again.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradscope.findings import MARKS
from gradscope.watcher.report import WatchReport


@dataclass(frozen=True)
class Marks:
    label: str
    """Legend text, naming the rule: "GS403 norm spike"."""
    steps: tuple[int, ...]
    symbol: str
    """Terminal character and matplotlib marker key."""


def marked() -> list[tuple[str, str, str]]:
    """The rules the views mark, in legend order: (rule, label, symbol), as each rule's
    `@rule(mark=...)` declares it (findings.MARKS)."""
    return [(rule, f"{rule} {m.label}", m.symbol) for rule, m in MARKS.items()]


def marks(report: WatchReport) -> list[Marks]:
    """One row per marked rule that has findings with steps: every optimizer's, merged."""
    out = []
    for rule, label, symbol in marked():
        steps = {s for f in report.findings if f.rule == rule for s in f.steps}
        if steps:
            out.append(Marks(label, tuple(sorted(steps)), symbol))
    return out
