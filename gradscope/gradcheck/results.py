"""Plain results of `gradscope gradcheck` (no torch here: reporters and tests read them).

check → [FunctionResult] → gradcheck.findings.judged → report.outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradscope.findings import Finding
from gradscope.outcome import Outcome

CHECKS = ("backward", "second-order", "forward-ad")
"""The checks a target can get, in the order they run."""
WRONG_GRADIENT, RAISED, CAVEAT = "GS201", "GS202", "GS203"
"""The rule of each part of a result (gradcheck/findings.py declares them): a PairFailure,
a CheckError, a Note. The terminal report shows them, the ids to `ignore`."""
UNCHECKED = "made-up-input"
"""The note on an input that could not be checked with made-up inputs (the table marks it
`?`): gradcheck/made_up.py."""
SURROGATE = "surrogate-grad"
"""The note on an input whose output is a step function of it and whose backward is smooth
(a surrogate gradient, a straight-through estimator): not checkable, marked `?` too."""


@dataclass(frozen=True)
class InputInfo:
    """One differentiable input, named the way the user's call names it."""

    name: str
    """Parameter name (`x`), `args[1]` for a *args element, or a module parameter name."""
    position: int | None
    """0-based position in the call (`Fn.apply(...)`, `f(...)`); None for keyword and module
    parameters."""
    kind: str
    """positional, keyword, parameter (an nn.Module's), or grad_output (second order)."""
    shape: tuple[int, ...]
    dtype: str
    coverage: str = ""
    """How the first-stage check covered this input (every column, or a sample of them)."""

    @property
    def label(self) -> str:
        if self.position is not None:
            return f"{self.name} (arg {self.position})"
        return f"{self.name} ({self.kind})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "position": self.position,
            "kind": self.kind,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "coverage": self.coverage,
        }


@dataclass(frozen=True)
class Element:
    """One Jacobian entry d output[output_index] / d input[input_index]."""

    output_index: tuple[int, ...]
    input_index: tuple[int, ...]
    analytical: float
    numerical: float

    @property
    def error(self) -> float:
        return abs(self.analytical - self.numerical)

    def to_dict(self) -> dict[str, Any]:
        return {
            "output_index": list(self.output_index),
            "input_index": list(self.input_index),
            "analytical": self.analytical,
            "numerical": self.numerical,
        }


@dataclass(frozen=True)
class Diagnosis:
    """A named pattern that explains a mismatch (`docs/gradcheck.md` lists them)."""

    slug: str
    """Stable id: constant-factor, sign-flip, none-grad, zero-grad, wrong-order, transposed,
    masked, not-scaled-by-grad-output, spurious-grad, mismatch, or an error slug."""
    message: str
    """One sentence: what the pattern is and what usually causes it."""
    details: dict[str, Any] = field(default_factory=dict)
    """Numbers behind the message (the factor, the matching input, the masked range)."""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.slug, "message": self.message, "details": dict(self.details)}


@dataclass(frozen=True)
class PairFailure:
    """An (input, output) Jacobian block whose analytical and numerical values disagree."""

    check: str
    input: InputInfo
    output: str
    output_index: int
    max_abs_error: float
    max_rel_error: float | None
    """Largest |a - n| / |n| over entries with |n| > atol; None when the numerical block is 0."""
    worst: tuple[Element, ...]
    diagnosis: Diagnosis
    resolution: str
    """`full` (every entry compared) or which rows/columns the explanation sampled."""

    def to_dict(self) -> dict[str, Any]:
        worst = self.worst[0] if self.worst else None
        return {
            "check": self.check,
            "input": self.input.name,
            "input_position": self.input.position,
            "output": self.output,
            "output_index": self.output_index,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "worst_index": (
                {"output": list(worst.output_index), "input": list(worst.input_index)}
                if worst
                else None
            ),
            "worst": [e.to_dict() for e in self.worst],
            "diagnosis": self.diagnosis.slug,
            "explanation": self.diagnosis.message,
            "details": dict(self.diagnosis.details),
            "resolution": self.resolution,
        }


@dataclass(frozen=True)
class CheckError:
    """The user's forward, backward or jvp raised: a failure of the target, not a crash."""

    check: str
    stage: str
    """forward, backward or jvp."""
    message: str
    location: str | None
    """`file:line` in the user's code, when one can be found."""
    diagnosis: Diagnosis
    traceback: str = field(default="", repr=False, compare=False)
    """The user's frames (gradscope's hidden), printed by `--debug`; not in the JSON."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "stage": self.stage,
            "message": self.message,
            "location": self.location,
            "diagnosis": self.diagnosis.slug,
            "explanation": self.diagnosis.message,
        }


@dataclass(frozen=True)
class Note:
    """A warning that does not fail the check by itself (precision, in-place, no grad)."""

    slug: str
    message: str
    subject: str = ""
    """The input it is about (its name), when it is about one."""

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.slug, "message": self.message}
        return {**out, "input": self.subject} if self.subject else out


@dataclass(frozen=True)
class CheckSummary:
    name: str
    passed: bool
    calls: int
    """Forward, backward and jvp calls the check made (explanation included)."""
    duration_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "calls": self.calls,
            "duration_s": round(self.duration_s, 6),
        }


@dataclass(frozen=True)
class FunctionResult:
    """One checked Function (or function, or module): its inputs, checks and failures.

    Not `outcome.Outcome`, which is what a whole command judged."""

    spec: str
    kind: str
    """autograd.Function, function or module."""
    inputs: tuple[InputInfo, ...]
    outputs: tuple[str, ...]
    checks: tuple[CheckSummary, ...]
    failures: tuple[PairFailure, ...] = ()
    errors: tuple[CheckError, ...] = ()
    notes: tuple[Note, ...] = ()
    dtype: str = "float64"
    seed: int = 0
    tolerance: dict[str, float] = field(default_factory=dict)
    """eps, atol and rtol used (they depend on the dtype)."""
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures and not self.errors and all(c.passed for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "kind": self.kind,
            "passed": self.passed,
            "dtype": self.dtype,
            "seed": self.seed,
            "tolerance": dict(self.tolerance),
            "inputs": [i.to_dict() for i in self.inputs],
            "outputs": list(self.outputs),
            "checks": [c.to_dict() for c in self.checks],
            "failures": [f.to_dict() for f in self.failures],
            "errors": [e.to_dict() for e in self.errors],
            "warnings": [n.to_dict() for n in self.notes],
            "duration_s": round(self.duration_s, 6),
        }


@dataclass(frozen=True)
class GradcheckReport:
    targets: tuple[FunctionResult, ...]
    torch_version: str = ""
    findings: tuple[Finding, ...] = ()
    """The findings as the user's settings judged them (gradcheck.findings.judged)."""

    @property
    def passed(self) -> bool:
        return all(t.passed for t in self.targets)

    def outcome(self) -> Outcome:
        return Outcome(
            "gradcheck",
            " ".join(t.spec for t in self.targets),
            list(self.findings),
            duration_s=sum(t.duration_s for t in self.targets),
            detail=self,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (`gradscope gradcheck --format json`)."""
        return self.outcome().to_dict()

    def body(self) -> dict[str, Any]:
        return {
            "command": "gradcheck",
            "torch": self.torch_version,
            "passed": self.passed,
            "targets": [t.to_dict() for t in self.targets],
        }
