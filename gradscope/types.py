"""Plain data passed between gradscope's stages (no torch import here).

probe → RunStats → rules → [Finding] → Report → reporters.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1


class Severity(enum.IntEnum):
    """Ordered so that `severity >= fail_on` is the CI gate."""

    INFO = 10
    WARNING = 20
    ERROR = 30

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use info, warning or error)") from None

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class TableRow:
    """One row of the troubleshooting table in DESIGN.md."""

    key: str
    symptom: str
    cause: str
    remedy: str


@dataclass(frozen=True)
class Finding:
    rule: str
    """Stable rule id, e.g. GS101."""
    slug: str
    """Human name of the rule, e.g. none-grad."""
    severity: Severity
    subject: str
    """Qualified parameter or module name, or "loss"."""
    message: str
    """What was measured, in one sentence."""
    advice: str
    """What to do about it, specific to this subject."""
    row: TableRow
    value: float | None = None
    threshold: float | None = None
    evidence: tuple[str, ...] = ()
    """Extra facts from explanation passes (which op, which line)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "slug": self.slug,
            "severity": str(self.severity),
            "subject": self.subject,
            "message": self.message,
            "advice": self.advice,
            "value": self.value,
            "threshold": self.threshold,
            "evidence": list(self.evidence),
            "table_row": {"symptom": self.row.symptom, "cause": self.row.cause,
                          "remedy": self.row.remedy},
        }


@dataclass(frozen=True)
class ParamStats:
    """Gradient statistics of one parameter tensor after one backward pass."""

    name: str
    module: str
    """Name of the owning module ("" for the root)."""
    shape: tuple[int, ...]
    dtype: str
    requires_grad: bool
    has_grad: bool
    grad_norm: float | None = None
    grad_max: float | None = None
    weight_norm: float = 0.0
    zero_fraction: float | None = None
    finite: bool = True
    depth: int | None = None
    """Position of the owning module in forward execution order (None: never ran)."""

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def ratio(self) -> float | None:
        """Gradient norm relative to weight norm: the size of one SGD step at lr=1."""
        if self.grad_norm is None or self.weight_norm == 0:
            return None
        return self.grad_norm / self.weight_norm


@dataclass(frozen=True)
class ModuleStats:
    name: str
    kind: str
    """Class name, for messages only."""
    ran: bool
    order: int | None = None
    """Index in forward execution order of first call."""


@dataclass(frozen=True)
class RunStats:
    """Everything one instrumented forward+backward measured."""

    params: tuple[ParamStats, ...]
    modules: tuple[ModuleStats, ...]
    loss_value: float | None
    loss_finite: bool
    loss_requires_grad: bool
    loss_source: str
    """How the tensor that backward ran on was obtained, said in the report."""
    duration_s: float
    timed: str = "forward+backward+stats"
    """What duration_s covers."""
    model_class: str = ""
    device: str = "cpu"
    saved_bytes: int = 0
    """Bytes of tensors the forward saved for backward (activation memory)."""
    retained: tuple[str, ...] = ()
    """Module attributes still holding a tensor with a grad_fn after the pass."""


@dataclass
class Report:
    """The result of `gradscope inspect`; `to_dict()` is the JSON document."""

    target: str
    stats: RunStats
    findings: list[Finding]
    thresholds: dict[str, float]
    torch_version: str = ""
    schema_version: int = SCHEMA_VERSION
    _flag_cache: dict[str, str] | None = field(default=None, init=False, repr=False, compare=False)

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

    def to_dict(self) -> dict[str, Any]:
        s = self.stats
        return {
            "version": self.schema_version,
            "tool": "gradscope",
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
            "findings": [f.to_dict() for f in self.findings],
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

    def _flagged(self) -> dict[str, str]:
        if self._flag_cache is None:
            self._flag_cache = {f.subject: f.slug for f in self.findings
                                if f.slug in ("exploding", "vanishing")}
        return self._flag_cache


def _param_dict(p: ParamStats, status: str) -> dict[str, Any]:
    d = asdict(p)
    d["shape"] = list(p.shape)
    d["numel"] = p.numel
    d["ratio"] = p.ratio
    d["status"] = status
    return d


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover
