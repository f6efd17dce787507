"""What a distributed run's sampled steps showed, counted once per step, so that a finding
holds only where it held in every sampled step (usage) or in two of them (outlier ranks).
No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.distributed import findings, signals
from gradscope.findings import Finding


class Observed:
    """What the sampled (armed) steps showed, counted once per step: usage findings and
    outlier ranks are reported only when they held in every sampled step (usage: a
    parameter that gets its gradient in some steps is the set varying, which
    find_unused_parameters=True is for) or, for outliers, in two of them."""

    def __init__(self) -> None:
        self.forward = 0
        """The last sampled forward counted."""
        self.steps = 0
        self.usage: dict[tuple[str, str], tuple[int, Finding]] = {}
        self.outliers: list[int] = []
        self.norms: dict[int, list[float]] = {}

    def count(self, world: int, local_norms: list[float], usage: list[Finding]) -> None:
        self.steps += 1
        for f in usage:
            if f.rule != "GS503":
                seen = self.usage.get((f.rule, f.subject), (0, f))[0]
                self.usage[(f.rule, f.subject)] = (seen + 1, f)
        self.outliers += [0] * (world - len(self.outliers))
        for r in signals.outlier_ranks(local_norms):
            self.outliers[r] += 1
            self.norms[r] = local_norms

    def findings(self) -> list[Finding]:
        out = []
        for seen, f in self.usage.values():
            if seen == self.steps:
                sampled = f"no gradient in {seen} of {self.steps} sampled step(s)"
                out.append(replace(f, evidence=(sampled, *f.evidence)))
        for r in signals.persistent(self.outliers, self.steps):
            out.append(findings.outlier_rank(r, self.norms[r], self.outliers[r], self.steps))
        return out
