"""What `gradscope diff a.jsonl b.jsonl` found: plain data, no torch.

log (read) → engine (RunsComparer, fed one step at a time) → RunsDiff → renderers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gradscope.diff.runs.tolerance import RunTolerance
from gradscope.diff.runs.trained import Training
from gradscope.findings import Finding
from gradscope.outcome import Outcome


def _num(x: float | None) -> float | str | None:
    """JSON-safe: NaN and infinities as strings, as watch writes them."""
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


@dataclass(frozen=True)
class Gap:
    """One compared quantity at one step: "loss", "grad_norm" or a parameter."""

    subject: str
    """"loss", "grad_norm", or the reference's parameter name."""
    new: str
    """The new run's name for it (the same for loss and grad_norm)."""
    ref_value: float | None
    new_value: float | None
    rel: float
    """|ref - new| / |ref| (inf: on one side only, or non-finite on one)."""
    ratio: float
    """|ref - new| over what the tolerance allows (> 1: beyond it)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "new": self.new,
            "ref": _num(self.ref_value),
            "new_value": _num(self.new_value),
            "rel": _num(self.rel),
            "over_tolerance": _num(self.ratio),
        }


@dataclass(frozen=True)
class Divergence:
    """The first step of one optimizer where something differs beyond the tolerance."""

    optimizer: int
    step: int
    gaps: tuple[Gap, ...]
    """Everything beyond the tolerance at that step, furthest beyond first."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer,
            "step": self.step,
            "differing": [g.to_dict() for g in self.gaps],
        }


@dataclass(frozen=True)
class Parting:
    """A parameter and the first step its gradient norm left the tolerance."""

    ref: str
    new: str
    step: int
    gap: Gap

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "new": self.new, "step": self.step, **self.gap.to_dict()}


@dataclass(frozen=True)
class Growth:
    """The gap some steps after the first divergence: the largest finite relative
    difference over every compared quantity at that step, and its factor over the first."""

    step: int
    rel: float
    factor: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "rel": _num(self.rel), "factor": _num(self.factor)}


@dataclass
class Series:
    """Per common step, for the plot (not in the JSON): relative differences."""

    steps: list[int] = field(default_factory=list)
    optimizers: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    params: dict[str, list[float]] = field(default_factory=dict)
    """Reference name → relative difference per common step (NaN: not compared there)."""


@dataclass
class RunsDiff:
    """The result of a diff of two `watch --log` runs; `to_dict()` is the JSON (kind diff,
    mode runs)."""

    ref_label: str
    new_label: str
    tolerance: RunTolerance
    lengths: dict[str, dict[int, int]]
    """"ref"/"new" → optimizer → steps logged."""
    last_steps: dict[str, int]
    common: dict[int, int]
    """Optimizer → steps compared (those both runs logged)."""
    intervals: dict[str, dict[int, int]]
    pairs: list[tuple[str, str, str]]
    """(ref name, new name, how paired) as gradscope/diff/align.py pairs them."""
    ref_only: list[str]
    new_only: list[str]
    prefixes: tuple[str, str]
    divergences: list[Divergence]
    parting: list[Parting]
    """Every parameter that left the tolerance, earliest first, then furthest beyond."""
    growth: list[Growth]
    training: list[Training]
    lr_differs: tuple[int, int, tuple[float, ...], tuple[float, ...]] | None = None
    """(optimizer, step, ref lrs, new lrs) where the learning rates first differ."""
    series: Series = field(default_factory=Series)
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    ignored: list[Finding] = field(default_factory=list)
    could_not_run: str | None = None
    duration_s: float = 0.0
    kind: str = "diff"
    mode: str = "runs"

    @property
    def label(self) -> str:
        return f"{self.ref_label} vs {self.new_label}"

    @property
    def differs(self) -> bool:
        return bool(self.divergences)

    @property
    def first(self) -> Divergence | None:
        return min(self.divergences, key=lambda d: d.step, default=None)

    @property
    def bitwise(self) -> bool:
        """Every compared value equal (NaN in the series: not compared at that step)."""
        s = self.series
        every = (s.loss, s.grad_norm, *s.params.values())
        return not self.differs and all(v == 0 or math.isnan(v) for xs in every for v in xs)

    def outcome(self) -> Outcome:
        """The outcome every output reads: a divergence is an error finding (GS607), and
        so is a run that did not train (GS608); a log that could not be compared is exit 2."""
        outcome = Outcome(
            self.kind,
            self.label,
            list(self.findings),
            could_not_run=self.could_not_run,
            duration_s=self.duration_s,
            detail=self,
        )
        self.ignored = list(outcome.ignored)
        return outcome

    def verdict(self) -> str:
        if self.could_not_run:
            return "not compared"
        if self.differs:
            return "differ"
        return "identical (bitwise)" if self.bitwise else "identical within tolerance"

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (`gradscope diff A.jsonl B.jsonl --format json`)."""
        return self.outcome().to_dict()

    def _summary(self) -> dict[str, Any]:
        first = self.first
        return {
            "verdict": self.verdict(),
            "differs": self.differs,
            "first_step": first.step if first else None,
            "first_optimizer": first.optimizer if first else None,
            "first_parting": [p.ref for p in self.parting[:5]],
            "steps": {k: {str(o): n for o, n in v.items()} for k, v in self.lengths.items()},
            "last_step": dict(self.last_steps),
            "compared_steps": {str(o): n for o, n in self.common.items()},
            "intervals": {k: {str(o): n for o, n in v.items()} for k, v in self.intervals.items()},
            "trained": {
                side: all(t.trained is not False for t in self.training if t.run == side)
                for side in ("ref", "new")
            },
            "duration_s": round(self.duration_s, 6),
        }

    def body(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "ref": self.ref_label,
            "new": self.new_label,
            "could_not_run": self.could_not_run,
            "summary": self._summary(),
            "tolerance": {
                "rtol": self.tolerance.rtol,
                "atol": self.tolerance.atol,
                "exact": self.tolerance.exact,
                "source": self.tolerance.source,
            },
            "learning_rates_differ": (
                None
                if self.lr_differs is None
                else {
                    "optimizer": self.lr_differs[0],
                    "step": self.lr_differs[1],
                    "ref": list(self.lr_differs[2]),
                    "new": list(self.lr_differs[3]),
                }
            ),
            "alignment": {
                "matched": [{"ref": r, "new": n, "how": h} for r, n, h in self.pairs],
                "ref_only": list(self.ref_only),
                "new_only": list(self.new_only),
                "prefixes": {"ref": self.prefixes[0], "new": self.prefixes[1]},
            },
            "divergences": [d.to_dict() for d in self.divergences],
            "parting": [p.to_dict() for p in self.parting],
            "growth": [g.to_dict() for g in self.growth],
            "training": [t.to_dict() for t in self.training],
            "notes": list(self.notes),
        }
