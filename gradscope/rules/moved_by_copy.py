"""A parameter in an optimizer's param groups that never gets a gradient, yet whose values
changed: the script moves it itself by copying (Mean Teacher's EMA teacher, handed to the
optimizer with its student). It does learn, by the copy; the optimizer, which skips a
parameter whose .grad is None, never steps it. GS413 says that instead of "it never learns".
A parameter the script differentiates by torch.autograd.grad and writes itself (TRPO's
natural-gradient step) is moved by that update, not by a copy: freezing it would break it."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.fmt import num
from gradscope.steps.records import ParamInfo

ADVICE = (
    "nothing moves it but the copy, so training is as meant; take it out of the optimizer's "
    "param groups and requires_grad_(False) it (a gradient that reached it later would be "
    "stepped against the copy's update)"
)


DERIVED_ADVICE = (
    "nothing to fix if that update is meant: the optimizer skips it while its .grad stays "
    "None; keep requires_grad on it (the script's torch.autograd.grad needs it)"
)


def as_information(finding: Finding, p: ParamInfo, steps: int) -> Finding:
    if p.differentiated:
        return replace(
            finding,
            severity=Severity.INFO,
            message=(
                f"{p.name} is in an optimizer's param groups but got no gradient (None) in "
                f"all {steps} steps, and its values changed (norm {num(p.weight_norm)} when "
                f"first seen, {num(p.last_norm)} at the end): the script moves it itself "
                "from derivatives it takes by torch.autograd.grad (a trust-region or "
                "natural-gradient step by hand, as TRPO's conjugate gradient and line search)"
            ),
            advice=DERIVED_ADVICE,
        )
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{p.name} is in an optimizer's param groups but got no gradient (None) in all "
            f"{steps} steps, and its values changed (norm {num(p.weight_norm)} when first "
            f"seen, {num(p.last_norm)} at the end): the script moves it itself by copying "
            "(an EMA teacher or target network); the optimizer skips it"
        ),
        advice=ADVICE,
    )
