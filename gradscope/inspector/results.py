"""`Report`: the result of one `gradscope inspect` (no torch here)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gradscope.findings import Finding, Severity, split_ignored
from gradscope.inspector.targets import file_of
from gradscope.outcome import Outcome
from gradscope.stats import ParamStats, RunStats


@dataclass
class Report:
    """The result of `gradscope inspect`; `to_dict()` is the JSON document."""

    target: str
    stats: RunStats
    findings: list[Finding]
    thresholds: dict[str, float]
    torch_version: str = ""
    ignored: list[Finding] = field(default_factory=list)
    """Findings an `ignore` pattern silenced: reported, never counted or failing."""
    _flag_cache: dict[str, str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        active, ignored = split_ignored(self.findings)
        self.findings, self.ignored = active, self.ignored + ignored

    @property
    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def failed(self, fail_on: Severity | None) -> bool:
        """True when a finding is at or above `fail_on` (None: never fail)."""
        return fail_on is not None and any(f.severity >= fail_on for f in self.findings)

    def counts(self) -> dict[str, int]:
        out = {str(s): 0 for s in Severity}
        for f in self.findings:
            out[str(f.severity)] += 1
        return out

    def outcome(self) -> Outcome:
        return Outcome(
            "inspect",
            self.target,
            list(self.findings),
            list(self.ignored),
            duration_s=self.stats.duration_s,
            file=file_of(self.target),
            detail=self,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (`gradscope inspect --format json`)."""
        return self.outcome().to_dict()

    def body(self) -> dict[str, Any]:
        s = self.stats
        return {
            "target": self.target,
            "torch": self.torch_version,
            "summary": {
                "model": s.model_class,
                "device": s.device,
                "parameters": sum(p.numel for p in s.params),
                "tensors": len(s.params),
                "loss": s.loss_value,
                "loss_source": s.loss_source,
                "duration_s": round(s.duration_s, 6),
                "saved_bytes": s.saved_bytes,
                "verdict": str(self.worst) if self.worst else "ok",
                "counts": self.counts(),
            },
            "thresholds": dict(self.thresholds),
            "parameters": [_param_dict(p, self.status(p)) for p in s.params],
        }

    def status(self, p: ParamStats) -> str:
        """One word per parameter: frozen, none, non-finite, zero, exploding, vanishing or ok."""
        if not p.requires_grad:
            return "frozen"
        if not p.has_grad:
            return "none"
        if not p.finite:
            return "non-finite"
        if p.grad_max == 0:
            return "zero"
        return self._flagged().get(p.name, "ok")

    def ignored_subjects(self) -> set[str]:
        """Subjects with an ignored finding and no active one: the table marks their rows."""
        return {f.subject for f in self.ignored} - {f.subject for f in self.findings}

    def _flagged(self) -> dict[str, str]:
        if self._flag_cache is None:
            self._flag_cache = {
                f.subject: f.slug for f in self.findings if f.slug in ("exploding", "vanishing")
            }
        return self._flag_cache


def _param_dict(p: ParamStats, status: str) -> dict[str, Any]:
    d = asdict(p)
    d["shape"] = list(p.shape)
    d["numel"] = p.numel
    d["ratio"] = p.ratio
    d["status"] = status
    return d
