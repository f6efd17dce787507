"""Steps worth marking in the views, each tied to the finding that explains it. No torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gradscope.config import Thresholds
from gradscope.rules.steps import spike_steps
from gradscope.watcher.report import WatchReport


@dataclass(frozen=True)
class Marks:
    label: str
    """Legend text, naming the rule: "GS403 norm spike"."""
    steps: tuple[int, ...]
    symbol: str
    """Terminal character and matplotlib marker key."""


def marks(report: WatchReport) -> list[Marks]:
    """Only the marks of rules that produced a finding, so every mark maps to one."""
    fired = {f.rule for f in report.findings}
    t = Thresholds(**{k.replace("-", "_"): v for k, v in report.thresholds.items()})
    steps = report.run.steps
    out = []
    if "GS401" in fired:
        bad = [
            r.step
            for r in steps
            if (r.loss is not None and not math.isfinite(r.loss))
            or (not r.skipped and not math.isfinite(r.grad_norm))
        ]
        out.append(Marks("GS401 non-finite", tuple(bad), "x"))
    if "GS403" in fired:
        out.append(Marks("GS403 norm spike", tuple(spike_steps(report.run, t, "norm")), "^"))
    if "GS402" in fired:
        out.append(Marks("GS402 loss spike", tuple(spike_steps(report.run, t, "loss")), "v"))
    if "GS406" in fired:
        out.append(Marks("GS406 clipped", tuple(r.step for r in steps if r.clipped), "|"))
    if fired & {"GS407", "GS408"}:
        out.append(Marks("GS407 skipped (AMP)", tuple(r.step for r in steps if r.skipped), "s"))
    return [m for m in out if m.steps]
