"""GS424: the gradient changed between the clip and the step. The watch reads the norms at
the clip; what the script adds after it (noise, surgery) is seen only through the update.
Under SGD an update is lr × the momentum buffer, a sum of μ^k × gradients the clip held to
max_norm, so at most lr × max_norm / (1 - μ): an update above it applied a gradient above
max_norm. Read at the steps
whose update is measured anyway (no read of its own). No torch."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.loss_diverged import diverged_at
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer, finite, loss_steps
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.meaning import OptimizerSettings
from gradscope.steps.records import StepRecord, WatchRun

SLACK = 1.01
"""Float rounding above the bound: clip_grad_norm_ scales by max_norm / (norm + 1e-6)."""


@rule(
    "GS424",
    "changed-after-clip",
    Severity.ERROR,
    "after-clip",
    Stage.WATCH,
    "watch: under SGD, a measured update larger than lr × max_norm / (1 - momentum) (the most "
    "gradients clipped to max_norm can move the weights) while the loss diverged: the "
    "gradient the step applied was changed after the clip; information when the loss did not",
    example="Gaussian gradient noise added after `clip_grad_norm_(params, 1.0)` with sigma growing "
    "as (1 + t)^0.55: the update 3.8× that bound at step 1, 146× later, the loss 2.3 → 2.3e7",
    fix="change the gradients before clipping (noise, surgery), so that the clip bounds what "
    "the step applies; check a noise schedule's direction (its sigma should decay)",
    supersedes=("GS419",),  # the steps are large by what was added, not by the lr
    objectives=(
        "any objective, one SGD optimizer (with or without momentum, nesterov; no weight decay) "
        "whose steps clip the same parameters by their L2 norm: its update bounds the "
        "gradient applied; an adaptive optimizer's update does not tell the gradient's size"
    ),
    explains=DIVERGENCE,
)
def changed_after_clip(run: WatchRun, t: Thresholds) -> list[Finding]:
    """At the sampled steps where the script clipped the optimizer's own parameters by
    their L2 norm, the update norm against lr × max_norm / (1 - μ); an error
    where the loss diverged (loss_diverged.diverged_at), information where it did not (noise
    added after the clip on purpose, Neelakantan et al.'s decaying sigma)."""
    out = []
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        if settings is None or settings.kind != "SGD" or len(run.store.optimizers()) > 1:
            continue
        bounds = [(r, (r.update_norm or 0.0) / b) for r, b in _bounds(s, settings) if b > 0]
        over = [(r, x) for r, x in bounds if finite(x) and x > SLACK]
        if over and len(over) * 2 > len(bounds):
            out.append(_finding(s, over))
    return out


def _bounds(s: Series, settings: OptimizerSettings) -> Iterator[tuple[StepRecord, float]]:
    """(step, the largest update clipped gradients allow: lr × max_norm / (1 - μ), the
    momentum buffer's bound whatever its history) at the measured steps, when every step of
    the optimizer clipped all its parameters by their L2 norm (one step unclipped puts a
    gradient of any size in the buffer)."""
    mu = max((g.momentum or 0.0) for g in settings.groups)
    if any(g.weight_decay for g in settings.groups) or mu >= 1:
        return  # decay's share of the update needs the weights' norm: not judged
    caps = [r.max_norm for r in s.steps if not r.skipped]
    if not caps or any(c is None for c in caps):
        return
    cap = max(c for c in caps if c is not None)
    for r in s.steps:
        if r.update_norm is None or r.scaled_clip or r.skipped:
            continue
        if r.norm_type not in (None, 2.0) or not _same_params(r):
            return
        yield r, max(r.lrs, default=0.0) * cap / (1 - mu)


def _same_params(r: StepRecord) -> bool:
    """The clip's total is the norm of the optimizer's own gradients: it covered them all."""
    total = r.clip_total
    return total is not None and math.isclose(total, r.grad_norm, rel_tol=1e-3)


def _finding(s: Series, over: list[tuple[StepRecord, float]]) -> Finding:
    steps = loss_steps(s)[0]
    diverged = diverged_at([(r.step, r.loss) for r in steps if r.loss is not None])
    first = over[0][0]
    worst = max(x for _, x in over)
    finding = RULES["GS424"].finding(
        s.subject("total-grad-norm"),
        s.say(
            f"the gradient changed between the clip and the step: at {len(over)} measured "
            f"steps from step {first.step} the update was up to {num(worst)}× the most "
            f"gradients clipped to max_norm {num(first.max_norm or 0)} can move the weights "
            "(lr × max_norm / (1 - momentum)); what the script adds after the clip (noise, "
            "surgery) is not bounded by it" + (", and the loss diverged" if diverged else "")
        ),
        "change the gradients before clipping, so that the clip bounds what the step applies; "
        "a noise schedule's sigma should decay; the lr is not the cause",
        value=worst,
        threshold=SLACK,
        evidence=(f"update {num(first.update_norm or 0)} at step {first.step}",),
    )
    if diverged is None:
        return replace(finding, severity=Severity.INFO)
    return about(finding, [first.step])
