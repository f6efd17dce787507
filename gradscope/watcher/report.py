"""`WatchReport`: a recorded run, its findings and the settings they were judged by."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gradscope.config import Settings
from gradscope.errors import ExitCode
from gradscope.findings import Finding, Severity, apply_settings
from gradscope.watcher.records import WatchRun

WATCH_SCHEMA_VERSION = 1
"""Version of the `gradscope watch --format json` document (docs/json-schema.md)."""


@dataclass(frozen=True)
class WatchReport:
    run: WatchRun
    findings: list[Finding]
    thresholds: dict[str, float]
    fail_on: Severity | None = Severity.ERROR
    torch_version: str = field(default="")
    distributed: dict[str, Any] | None = None
    """Under torchrun: the ranks' merged numbers (DistReport.summary()); None otherwise."""

    @classmethod
    def build(cls, run: WatchRun, settings: Settings) -> WatchReport:
        import torch

        from gradscope.rules import steps as step_rules

        findings = apply_settings(step_rules.diagnose(run, settings.thresholds), settings)
        findings.sort(key=lambda f: (-f.severity, f.rule))
        return cls(run, findings, settings.threshold_dict(), settings.fail_on, torch.__version__)

    def failed(self, fail_on: Severity | None = None) -> bool:
        level = self.fail_on if fail_on is None else fail_on
        return level is not None and any(f.severity >= level for f in self.findings)

    def exit_code(self) -> ExitCode:
        """130 interrupted, 2 the script crashed, else 1 on findings at --fail-on, 0."""
        if self.run.status == "interrupted":
            return ExitCode.INTERRUPTED
        if self.run.status == "crashed":
            return ExitCode.ERROR
        return ExitCode.FINDINGS if self.failed() else ExitCode.OK

    def summary(self) -> dict[str, Any]:
        steps = self.run.steps
        losses = [r.loss for r in steps if r.loss is not None and math.isfinite(r.loss)]
        norms = [r.grad_norm for r in steps if math.isfinite(r.grad_norm)]
        counts = {str(s): sum(f.severity == s for f in self.findings) for s in Severity}
        worst = max((f.severity for f in self.findings), default=None)
        return {
            "status": self.run.status,
            "error": self.run.error,
            "steps": len(steps),
            "skipped_steps": sum(r.skipped for r in steps),
            "clipped_steps": sum(r.clipped for r in steps),
            "optimizers": list(self.run.optimizers),
            "parameters": len(self.run.params),
            "duration_s": round(self.run.duration_s, 6),
            "loss": _range(
                losses, steps[0].loss if steps else None, steps[-1].loss if steps else None
            ),
            "grad_norm": _range(
                norms, steps[0].grad_norm if steps else None, steps[-1].grad_norm if steps else None
            ),
            "update_every": self.run.update_every,
            "verdict": str(worst) if worst else "ok",
            "counts": counts,
            "notes": list(self.run.notes),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": WATCH_SCHEMA_VERSION,
            "tool": "gradscope",
            "kind": "watch",
            "target": self.run.label,
            "torch": self.torch_version,
            "summary": self.summary(),
            "thresholds": self.thresholds,
            "findings": [f.to_dict() for f in self.findings],
            "params": [
                {
                    "name": p.name,
                    "shape": list(p.shape),
                    "requires_grad": p.requires_grad,
                    "in_optimizer": p.in_optimizer,
                    "lr": p.lr,
                }
                for p in self.run.params
            ],
            "steps": [r.to_dict() for r in self.run.steps],
            **({"distributed": self.distributed} if self.distributed is not None else {}),
        }


def _range(values: list[float], first: float | None, last: float | None) -> dict[str, Any]:
    return {
        "first": first,
        "last": last,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }
