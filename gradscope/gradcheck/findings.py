"""A gradcheck result as findings (GS201-GS203), judged like every other command's:
`gradscope gradcheck` and a `[[gradcheck]]` target of `gradscope check` give one verdict."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gradscope.config import Settings
from gradscope.findings import RULES, Finding, Severity
from gradscope.rules.registry import Stage, rule

if TYPE_CHECKING:  # types only: gradscope/__init__ loads this module on every command
    from gradscope.gradcheck.results import FunctionResult, GradcheckReport


def findings(report: GradcheckReport) -> list[Finding]:
    """Per Function: its wrong gradients, what raised, then the caveats."""
    return [f for t in report.targets for f in (*wrong_gradient(t), *raised(t), *caveat(t))]


@rule(
    "GS201",
    "jacobian-mismatch",
    Severity.ERROR,
    "gradcheck",
    Stage.GRADCHECK,
    "a custom Function's analytical gradient differs from the numerical one",
    example="x * x whose backward forgot the factor 2",
    fix=(
        "correct the backward (or jvp) named by the diagnosis; the worst elements show analytical "
        "against numerical values"
    ),
    command="gradscope gradcheck gradscope.examples.functions:SquareMissingFactor",
)
def wrong_gradient(t: FunctionResult) -> list[Finding]:
    """The analytical gradient (backward, or jvp for forward mode) differs from central finite
    differences beyond |a - n| <= atol + rtol |n| (slow mode's tolerance, per dtype), on every
    element of a small input, else 32 exact Jacobian columns and 4 random directions; the failing
    pair is then measured in full and diagnosed (constant factor, sign flip, transposed, wrong
    order, masked elements, grad_output ignored...)."""
    out = []
    for f in t.failures:
        worst = tuple(
            f"d {f.output}{list(e.output_index)} / d {f.input.name}"
            f"{list(e.input_index)}: analytical {e.analytical:.4g}, numerical "
            f"{e.numerical:.4g}"
            for e in f.worst[:3]
        )
        out.append(
            RULES["GS201"].finding(
                f"{t.spec}: {f.input.label} -> {f.output}",
                f"{f.check}: gradient of {f.output} with respect to {f.input.label} is wrong "
                f"(max abs error {f.max_abs_error:.3g}): {f.diagnosis.slug}",
                f.diagnosis.message,
                f.max_abs_error,
                t.tolerance.get("atol"),
                worst,
            )
        )
    return out


@rule(
    "GS202",
    "function-raised",
    Severity.ERROR,
    "gradcheck",
    Stage.GRADCHECK,
    "a checked Function's forward, backward or jvp raised",
    example="a backward that indexes ctx.saved_tensors past its end",
    fix=(
        "fix the raising code; backward returns one gradient per forward input (None for "
        "non-tensor ones), each shaped like its input"
    ),
    command="gradscope gradcheck gradscope.examples.functions:BackwardRaises",
)
def raised(t: FunctionResult) -> list[Finding]:
    """The checked Function's forward, backward or jvp raised, or returned the wrong number or
    shape of gradients; the stage and the user's line are named."""
    out = []
    for e in t.errors:
        where = f" at {e.location}" if e.location else ""
        out.append(
            RULES["GS202"].finding(
                f"{t.spec}: {e.stage}",
                f"{e.check}: {e.stage} raised{where}: {e.message}",
                e.diagnosis.message,
            )
        )
    return out


@rule(
    "GS203",
    "gradcheck-warning",
    Severity.WARNING,
    "gradcheck",
    Stage.GRADCHECK,
    "a gradcheck caveat: low precision, in-place changes, outputs without grad",
    example="a Function that saves exp(x) and then adds 1 to it in place",
    fix=(
        "check in float64; save tensors after their last change (or save a clone); mark outputs "
        "that are not differentiable with ctx.mark_non_differentiable"
    ),
    command="gradscope gradcheck gradscope.examples.functions:ExpSavedThenModified",
)
def caveat(t: FunctionResult) -> list[Finding]:
    """A caveat that can make the verdict wrong: inputs below float64 (tolerances loosened), an
    input or a saved tensor modified in place, an output that does not require grad, a warning
    raised by the forward."""
    return [
        RULES["GS203"].finding(
            f"{t.spec}: {n.slug}", n.message, "see docs/gradcheck.md for this caveat"
        )
        for n in t.notes
    ]


def judged(report: GradcheckReport, settings: Settings) -> GradcheckReport:
    """The report with its findings under the user's severities and ignores; a Function
    whose check failed always has a finding, so no severity setting can turn a wrong
    gradient into silence without it being shown (as ignored)."""
    return replace(report, findings=tuple(settings.judged(findings(report))))
