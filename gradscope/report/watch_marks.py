"""Steps worth marking in the views, each tied to the finding that explains it. No torch.

The steps come from the findings themselves (`Finding.steps`, filled by the rules that
are about particular steps), so a view marks exactly what a finding says and never
judges the run again.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradscope.watcher.report import WatchReport


@dataclass(frozen=True)
class Marks:
    label: str
    """Legend text, naming the rule: "GS403 norm spike"."""
    steps: tuple[int, ...]
    symbol: str
    """Terminal character and matplotlib marker key."""


MARKED = (
    ("GS401", "GS401 non-finite", "x"),
    ("GS403", "GS403 norm spike", "^"),
    ("GS402", "GS402 loss spike", "v"),
    ("GS406", "GS406 clipped", "|"),
    ("GS407", "GS407 skipped (AMP)", "s"),
    ("GS408", "GS408 loss scale < 1", "o"),
)
"""The rules the views mark, in legend order: (rule, label, symbol). The other rules'
steps (GS412's every carried step, GS417's one) would only crowd the rows."""


def marks(report: WatchReport) -> list[Marks]:
    """One row per marked rule that has findings with steps: every optimizer's, merged."""
    out = []
    for rule, label, symbol in MARKED:
        steps = {s for f in report.findings if f.rule == rule for s in f.steps}
        if steps:
            out.append(Marks(label, tuple(sorted(steps)), symbol))
    return out
