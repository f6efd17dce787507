"""An update that made NaN/Inf out of finite gradients (GS439). No torch.

The gradients a step applied were finite and its update was not: the optimizer's own
arithmetic wrote the NaN into the weights, and the next forward's NaN (GS401) is its
consequence, so replaying that forward names no op. The classic: a model in float16
under Adam, whose eps of 1e-8 is 0 in float16, divides by a second moment that has
underflowed to 0. Read at the steps whose update `watch` measures (every tensor at the
first 10).
"""

from __future__ import annotations

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import about, by_optimizer, finite
from gradscope.steps.records import StepRecord, WatchRun

FLOAT16_TINY = 5.960464477539063e-08
"""float16's smallest subnormal: a smaller eps rounds to 0 there."""


@rule(
    "GS439",
    "update-nan",
    Severity.ERROR,
    "exploding",
    Stage.WATCH,
    "watch: an optimizer's update was NaN/Inf although the gradients it applied were finite: "
    "the step itself wrote NaN into the weights",
    example="model.half() trained with Adam: its eps 1e-8 is 0 in float16, and a second "
    "moment that underflows to 0 is divided by at step 1",
    fix="keep float32 weights and train in float16 through autocast with GradScaler (or in "
    "bfloat16); in pure float16, an eps of 1e-4 or more; check for a learning rate or "
    "hyperparameter that is NaN",
    objectives="any: the update against the gradients it applied, whatever the loss",
    explains=("GS401", "GS403", "GS407", "GS408", "GS434"),
)
def update_nan(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """At a measured step the update norm was non-finite while every gradient norm up to
    that step was finite (and the step not skipped): named at that step, with the
    optimizer, its eps and the weights' dtype."""
    out = []
    for s in by_optimizer(run):
        step = _first(s.live())
        if step is None:
            continue
        settings = run.settings_of(s.index)
        kind = settings.kind if settings is not None else "the optimizer"
        eps = settings.groups[0].eps if settings is not None and settings.groups else None
        dtypes = sorted({run.params[i].dtype for i in s.members if i < len(run.params)})
        why = _why(kind, eps, dtypes, step)
        finding = this.finding(
            s.subject("update"),
            s.say(
                f"{kind}'s update at step {step.step} was non-finite although the gradients "
                f"it applied were finite (total norm {num(step.grad_norm)}): the step wrote "
                f"NaN/Inf into the weights, and every later forward reads them{why}"
            ),
            "keep float32 weights and train in float16 through autocast with GradScaler (or "
            "in bfloat16)"
            + (
                "; in pure float16, an eps of 1e-4 or more"
                if "float16" in dtypes
                else "; check the learning rate and the optimizer's other settings for NaN"
            ),
            value=float(step.step),
            evidence=(
                f"step {step.step}: gradient norm {num(step.grad_norm)}, update norm "
                f"{num(step.update_norm)}",
                f"weights' dtype: {', '.join(dtypes)}",
            ),
        )
        out.append(about(finding, [step.step]))
    return out


def _first(steps: list[StepRecord]) -> StepRecord | None:
    """The first step with a non-finite update of finite gradients, before any step
    whose gradients were non-finite."""
    for r in steps:
        if not finite(r.grad_norm):
            return None
        if r.update_norm is not None and not finite(r.update_norm) and not r.skipped:
            return r
    return None


def _why(kind: str, eps: float | None, dtypes: list[str], step: StepRecord) -> str:
    if "float16" in dtypes and eps is not None and 0 < eps < FLOAT16_TINY:
        return (
            f": the weights are float16, where {kind}'s eps {num(eps)} rounds to 0, so a "
            "second moment that underflows to 0 is divided by"
        )
    lrs = [lr for lr in step.lrs if not finite(lr)]
    if lrs:
        return f": its learning rate was {num(lrs[0])}"
    return ""
