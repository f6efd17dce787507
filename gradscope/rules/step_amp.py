"""Verdicts about mixed precision (GS407, GS408): GradScaler's skipped steps past its opening
search, and a loss scale that fell below 1 (the gradients non-finite at every scale). Each
optimizer's steps are judged on their own. No torch."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gradscope.config import Thresholds
from gradscope.findings import Finding, Mark, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import (
    about,
    by_optimizer,
    inspect_command,
    step_list,
)
from gradscope.steps.records import StepRecord, WatchRun


# -- GS407 / GS408 ---------------------------------------------------------------------
@rule(
    "GS407",
    "amp-skips",
    Severity.WARNING,
    "amp",
    Stage.WATCH,
    "watch: GradScaler skipped many steps after warm-up, or several in a row",
    example="float16 autocast on a model whose activations exceed 65504",
    fix="bf16 instead of fp16, a smaller learning rate, or the unstable op in fp32",
    thresholds=(
        Threshold(
            "amp-skip-rate",
            0.05,
            "GradScaler skipped more than this fraction of the steps after warm-up...",
        ),
        Threshold(
            "amp-skip-streak",
            3,
            "...or this many steps in a row",
        ),
        "warmup-steps",
    ),
    objectives=(
        "any: GradScaler's skipped steps (float16 overflows), a mechanism independent of "
        "what the loss means"
    ),
    mark=Mark("skipped (AMP)", "s"),
)
def amp_skips(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """After warmup-steps, GradScaler skipped more than amp-skip-rate of the steps, or
    amp-skip-streak steps in a row: the gradients overflow float16 at most scales. The
    scaler's opening search is not judged: from the first step it skips and lowers its scale
    until the gradients fit (an initial scale of 2^16 or more overflows at first by design),
    however long that takes, as long as the scale stays at 1 or above."""
    out = []
    for series in by_optimizer(run):
        searching = _opening_search(series.steps)
        steps = [
            r
            for r in series.steps
            if r.step > t.warmup_steps and r.scale is not None and r.step not in searching
        ]
        if not steps:
            continue
        skipped = [r.step for r in steps if r.skipped]
        streak = best = 0
        for r in steps:
            streak = streak + 1 if r.skipped else 0
            best = max(best, streak)
        rate = len(skipped) / len(steps)
        if rate <= t.amp_skip_rate and best < t.amp_skip_streak:
            continue
        finding = this.finding(
            series.subject("grad-scaler"),
            series.say(
                f"GradScaler skipped {len(skipped)} of {len(steps)} steps after warm-up "
                f"({rate:.0%}), up to {best} in a row"
            ),
            "the gradients overflow fp16 (or are NaN) at most scales: use bf16, lower the "
            "learning rate, or keep the unstable op in fp32",
            value=rate,
            threshold=t.amp_skip_rate,
            evidence=(
                f"skipped steps: {step_list(skipped)}",
                f"loss scale {num(steps[0].scale)} at step {steps[0].step}, "
                f"{num(steps[-1].scale)} at step {steps[-1].step}",
            ),
        )
        out.append(about(finding, skipped))
    return out


def _opening_search(steps: Sequence[StepRecord]) -> set[int]:
    """The steps GradScaler skipped from the run's first step on, each at a lower scale
    than the one before and none below 1: its search for a scale the gradients fit in."""
    out: set[int] = set()
    last = math.inf
    for r in steps:
        if not r.skipped or r.scale is None or not 1 <= r.scale < last:
            break
        out.add(r.step)
        last = r.scale
    return out


@rule(
    "GS408",
    "amp-scale-collapse",
    Severity.ERROR,
    "amp",
    Stage.WATCH,
    "watch: GradScaler's loss scale fell below 1",
    example="a NaN made in the forward under GradScaler",
    fix="find the NaN/Inf (GS401; gradscope inspect --script ... --step N) instead of letting the "
    "scaler shrink",
    objectives="any: GradScaler's loss scale, a mechanism independent of what the loss means",
    mark=Mark("loss scale < 1", "o"),
)
def amp_scale(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """GradScaler's loss scale fell below 1: the gradients are non-finite at every scale, so the
    scaler keeps halving it."""
    low = [r for r in run.steps if r.scale is not None and r.scale < 1]
    if not low:
        return []
    finding = this.finding(
        "grad-scaler",
        f"the loss scale fell below 1 at step {low[0].step} ({num(low[0].scale)}); "
        f"lowest {num(min(r.scale or 0 for r in low))}",
        "the gradients are non-finite at every scale: find the NaN/Inf (GS401; "
        f"`{inspect_command(run, low[0].step)}`) instead of letting the scaler shrink",
        value=min(r.scale or 0 for r in low),
        threshold=1.0,
        evidence=(f"{len(low)} steps with scale < 1: {step_list([r.step for r in low])}",),
    )
    return [about(finding, (r.step for r in low))]


# -- GS409 / GS410 / GS411 / GS413 -----------------------------------------------------
