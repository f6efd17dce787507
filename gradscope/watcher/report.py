"""`WatchReport`: a recorded run, its findings and the settings they were judged by."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from gradscope.config import Settings
from gradscope.errors import ExitCode, known_cause
from gradscope.findings import Finding, Severity, split_ignored
from gradscope.outcome import Outcome
from gradscope.steps import noise
from gradscope.steps.noise import NoiseSummary
from gradscope.steps.precursor_json import precursors
from gradscope.steps.records import MANUAL, WatchRun
from gradscope.steps.step_record import steps_by_optimizer
from gradscope.watcher.faults import Fault

# torch is imported in functions: `gradscope --help` must not load it

STOPPED = {"interrupted": ExitCode.INTERRUPTED, "terminated": ExitCode.TERMINATED}
"""Run statuses that are exit codes of their own."""


@dataclass(frozen=True)
class WatchReport:
    run: WatchRun
    findings: list[Finding]
    thresholds: dict[str, float]
    torch_version: str = field(default="")
    distributed: dict[str, Any] | None = None
    """Under torchrun: the ranks' merged numbers (DistReport.summary()); None otherwise."""
    where: str | None = None
    """When the script failed: file:line of its own code that raised (or called sys.exit)."""
    ignored: list[Finding] = field(default_factory=list)
    """Findings an `ignore` pattern silenced: reported, never failing."""
    faults: tuple[Fault, ...] = ()
    """gradscope's own failures during the run (each an internal-error note): exit 3."""

    @classmethod
    def of(
        cls,
        run: WatchRun,
        findings: list[Finding],
        settings: Settings,
        faults: tuple[Fault, ...] = (),
    ) -> WatchReport:
        """The report of a run judged by `gradscope.rules.watch.judge` (the rules live
        there, not here: the watcher records, the rules layer judges); findings an
        `ignore` pattern marked are kept apart in `ignored`."""
        import torch

        active, ignored = split_ignored(findings)
        version = torch.__version__
        return cls(run, active, settings.threshold_dict(), version, ignored=ignored, faults=faults)

    def internal_error(self) -> str | None:
        """gradscope's first failure, in one line; None when it never failed."""
        return self.faults[0].note() if self.faults else None

    @property
    def judged(self) -> bool:
        """At least one optimizer step (or update by hand) was recorded and judged."""
        return bool(self.run.steps)

    @property
    def partial(self) -> bool:
        """The script did not run to its end (crash, Ctrl-C, SIGTERM): the report covers
        only the steps before, none when it failed before its first step."""
        return self.run.status in ("crashed", "interrupted", "terminated")

    def failure(self) -> str | None:
        """The script's failure in one line, "train.py:12: the script raised ValueError: …";
        None when it did not crash."""
        run = self.run
        if run.status != "crashed":
            return None
        error = run.error or "the script failed"
        if not error.startswith(("the script ", "gradscope ")):
            # a SyntaxError's text ends with its place, which `where` already says
            error = "the script raised " + re.sub(r" \([^()]*, line \d+\)$", "", error)
        error += known_cause(error)
        return f"{self.where}: {error}" if self.where else error

    def nothing_judged(self) -> str | None:
        """Why no step could be judged, in one sentence; None when steps were judged."""
        if self.judged:
            return None
        before = {
            "crashed": "the script failed",
            "interrupted": "the run was interrupted",
            "terminated": "the run was terminated (SIGTERM)",
        }.get(self.run.status)
        if before:
            return f"nothing was judged: {before} before its first optimizer step"
        calls = self.run.backward_calls
        if calls:
            return (
                f"nothing was judged: {calls} backward call{'s' if calls != 1 else ''} "
                "but no optimizer step or parameter update was seen"
            )
        return "nothing was judged: the script ran no backward() and no optimizer step"

    def outcome(self) -> Outcome:
        """A crash, or a run in which no step was judged, could not run (exit 2, never a
        pass, whatever its findings); Ctrl-C and SIGTERM are their own exit codes."""
        run = self.run
        steps = f"{len(run.steps)} optimizer step{'' if len(run.steps) == 1 else 's'}"
        stopped = STOPPED.get(run.status)
        could_not_run = None
        if run.status == "crashed":
            could_not_run = f"{self.failure()} (after {steps})"
        elif stopped is not None:
            could_not_run = f"{run.status} after {steps}"
        elif not self.judged:
            could_not_run = self.nothing_judged()
        if self.faults and stopped is None:  # gradscope's bug: exit 3, never a pass
            stopped = ExitCode.INTERNAL
            could_not_run = f"{self.internal_error()} (after {steps})"
        label = run.label.removeprefix("script ")
        return Outcome(
            "watch",
            label,
            list(self.findings),
            list(self.ignored),
            could_not_run=could_not_run,
            stopped_by=stopped,
            duration_s=run.duration_s,
            file=label if label.endswith(".py") else None,
            detail=self,
            title=run.label,
            unwritten=list(run.unwritten),
        )

    def optimizer_label(self, index: int) -> str:
        return self.run.optimizer_label(index)

    @cached_property
    def noise(self) -> list[NoiseSummary]:
        """The critical batch size of each optimizer measured (or why there is none)."""
        run = self.run
        return noise.summaries(run.steps, max(1, len(run.optimizers)), run.batch_read)

    def noise_document(self) -> dict[str, Any]:
        """The JSON's `noise_scale`: the summaries, the smoothed series, per module."""
        out: dict[str, Any] = {"summaries": [s.to_dict() for s in self.noise]}
        out["series"] = [
            {"optimizer": s.optimizer, "step": p.step, "b_simple": p.b_simple}
            for s in self.noise
            if s.steps
            for p in noise.series(self.run.steps, s.optimizer)
        ]
        layers = self.run.store.noise
        measured = next((s for s in self.noise if s.optimizer == layers.optimizer), None)
        scale = 1.0
        if measured is not None and measured.unit == "samples" and measured.batch_size:
            scale = measured.batch_size  # samples per micro-batch
        out["layers"] = noise.by_layer(self.run.names(), layers.grad_sq, layers.trace, scale)
        return out

    def per_optimizer(self) -> list[dict[str, Any]]:
        """One entry per optimizer (by index): its steps, loss and gradient norm. The
        losses of two optimizers (a GAN's D and G) are different quantities."""
        out = []
        steps = steps_by_optimizer(self.run.steps)
        for i, kind in enumerate(self.run.optimizers):
            own = steps.get(i, [])
            out.append(
                {
                    "index": i,
                    "optimizer": kind,
                    "label": self.optimizer_label(i),
                    "manual": kind == MANUAL,
                    "steps": len(own),
                    "parameters": len(self.run.members_of(i)),
                    "loss": _series_range([r.loss for r in own]),
                    "grad_norm": _series_range([r.grad_norm for r in own]),
                    "loss_kind": _to_dict(self.run.loss_kind(i)),
                    "settings": [s.to_dict() for s in self.run.settings[i]]
                    if i < len(self.run.settings)
                    else [],
                    "schedulers": [s.to_dict() for s in self.run.schedulers if s.optimizer == i],
                }
            )
        return out

    def summary(self) -> dict[str, Any]:
        steps = self.run.steps
        losses = [r.loss for r in steps if r.loss is not None and math.isfinite(r.loss)]
        norms = [r.grad_norm for r in steps if math.isfinite(r.grad_norm)]
        counts = {str(s): sum(f.severity == s for f in self.findings) for s in Severity}
        worst = max((f.severity for f in self.findings), default=None)
        verdict = str(worst) if worst else "ok"
        return {
            "status": self.run.status,
            "error": self.run.error,
            "where": self.where,
            "traceback": self.run.traceback,
            "judged": self.judged,
            "partial": self.partial,
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
            "per_optimizer": self.per_optimizer(),
            "backward_calls": self.run.backward_calls,
            "update_every": self.run.update_every,
            "verdict": verdict if self.judged or worst else "not judged",
            "nothing_judged": self.nothing_judged(),
            "counts": counts,
            "notes": list(self.run.notes),
            "internal_errors": [
                {"part": f.part, "step": f.step, "error": f.error, "thread": f.thread}
                for f in self.faults
            ],
            "noise_scale": [n.to_dict() for n in self.noise],
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (`gradscope watch --format json`)."""
        return self.outcome().to_dict()

    def body(self) -> dict[str, Any]:
        return {
            "target": self.run.label,
            "torch": self.torch_version,
            "summary": self.summary(),
            "thresholds": self.thresholds,
            "params": [
                {
                    "name": p.name,
                    "shape": list(p.shape),
                    "requires_grad": p.requires_grad,
                    "in_optimizer": p.in_optimizer,
                    "in_model": p.in_model,
                    "lr": p.lr,
                    "group": p.group,
                    "initial_norm": p.weight_norm,
                    "dtype": p.dtype,
                }
                for p in self.run.params
            ],
            "steps": [r.to_dict() for r in self.run.steps],
            "noise_scale": self.noise_document(),
            "precursors": precursors(self.run),
            **({"distributed": self.distributed} if self.distributed is not None else {}),
        }


def _to_dict(value: Any) -> Any:
    return None if value is None else value.to_dict()


def _series_range(series: list[float | None]) -> dict[str, Any]:
    finite = [v for v in series if v is not None and math.isfinite(v)]
    return _range(finite, series[0] if series else None, series[-1] if series else None)


def _range(values: list[float], first: float | None, last: float | None) -> dict[str, Any]:
    return {
        "first": first,
        "last": last,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
    }
