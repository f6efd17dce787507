"""A reduction that scales the step (GS438): a loss summed over a large batch, divided
twice under gradient accumulation, or multiplied by a loss scale never divided out, under
an optimizer whose step follows the gradient's scale (SGD). No torch.

SGD's step is lr × the gradient: `reduction="sum"` over B samples makes it B times what
lr says (lr × B in effect), and a loss divided by K micro-batches twice makes it K times
smaller. Adam-like optimizers divide the gradient by its own running scale, so neither
changes their step (up to eps): they are never judged here. The loss's autograd graph
shows the reduction, the count it sums over and the factor (watcher/loss_graph.py).
"""

from __future__ import annotations

import math
import statistics

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_blowup import early_blowup_of
from gradscope.rules.step_common import Series, about, by_optimizer, finite
from gradscope.rules.step_meaning import HEALTHY_RATIO, lr_too_high
from gradscope.steps.meaning import LossTerm, OptimizerSettings
from gradscope.steps.records import WatchRun


@rule(
    "GS438",
    "reduction-scales-step",
    Severity.WARNING,
    "reduction",
    Stage.WATCH,
    "watch: the loss's reduction scales SGD's step: a sum over the batch whose steps blow "
    "up, a loss divided twice by the accumulation steps, or a loss scale never divided out",
    example='`F.cross_entropy(logits, y, reduction="sum")` over a batch of 256 with '
    "`SGD(lr=0.1)`: each step is lr × 256 = 25.6 times the mean gradient, and the loss "
    "turns NaN by step 14",
    fix='reduction="mean" (or lr divided by the batch size); under accumulation divide '
    "the loss by the number of micro-batches once; a loss scale kept by hand: divide the "
    "gradients by it before the step",
    supersedes=("GS419",),  # the sum makes the large steps, not the lr
    objectives=(
        "a torch loss term whose reduction the graph shows (a sum over B targets, or a "
        "mean divided by K twice, or multiplied by a constant that accounts for GS419's "
        "excess) under an optimizer whose step is lr × the gradient: the "
        "reduction scales the step; Adam-like optimizers cancel it and are never judged, "
        "and a custom term has no reduction to read"
    ),
    explains=("GS401", "GS402", "GS403", "GS404", "GS405", "GS409", "GS414", "GS415"),
)
def reduction_scales_step(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Under an optimizer that is not Adam-like (its step is lr × the gradient), one of:
    a loss term summed over its B targets (not divided by them) while the first steps did
    harm (the update moved the weights by a large fraction, the loss blew up early or went
    non-finite): the effective learning rate is lr × B; or a mean loss multiplied by
    1/K² with K backward calls per step (divided by K twice): each step K times smaller
    than its lr says. Adam, AdamW and the other adaptive optimizers are invariant to both
    (a constant factor on the loss cancels in m / √v), and are never judged, nor is a
    class whose step gradscope does not know (optim_known); nor is a sum whose lr was set
    for it and did no harm, nor one whose divisor changed between the steps read (a count
    taken from each batch: RetinaNet's box loss summed over the matched anchors and divided
    by their number is a mean per positive, whatever the batch size)."""
    out = []
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        kind = run.loss_kind(s.index)
        if settings is None or settings.update != "torch" or kind is None or s.manual(run):
            continue
        calls = statistics.median(r.backward_calls for r in s.steps[:3]) if s.steps else 1
        for term in kind.terms:
            found = (
                _summed(run, s, term, settings, t)
                or _twice(s, term, settings, calls)
                or _scaled(run, s, term, settings, t)
            )
            if found is not None:
                out.append(found)
                break
    return out


def _summed(
    run: WatchRun, s: Series, term: LossTerm, settings: OptimizerSettings, t: Thresholds
) -> Finding | None:
    if term.reduction != "sum" or not term.count or term.count < 2 or term.counted:
        return None  # (counted: divided by a count taken from each batch, a mean over it)
    scale = term.factor * term.count
    if not math.isfinite(scale) or scale < 2:
        return None  # divided by its count afterwards: a mean
    harm = _harm(run, s, t)
    if harm is None:
        return None  # an lr set for the sum
    lr = max(s.steps[0].lrs, default=math.nan)
    return about(
        RULES["GS438"].finding(
            s.subject("loss"),
            s.say(
                f"the loss is a sum over {term.count} targets ({term.describe()}), so "
                f"{settings.kind}'s step is lr × {num(scale)} the mean gradient: an "
                f"effective lr of {num(lr * scale)} where lr = {num(lr)}; {harm}"
            ),
            'use reduction="mean" (or divide the loss by the batch size), or divide the '
            f"learning rate by {num(scale)}; Adam-like optimizers do not care",
            value=scale,
            evidence=(f"loss: {term.describe()}", f"{settings.kind} lr {num(lr)} at step 1"),
        ),
        [s.steps[0].step],
    )


def _twice(s: Series, term: LossTerm, settings: OptimizerSettings, calls: float) -> Finding | None:
    if calls < 2 or term.reduction != "mean" or not finite(term.factor) or term.factor <= 0:
        return None
    if abs(term.factor * calls * calls - 1) > 1e-6:
        return None
    return about(
        RULES["GS438"].finding(
            s.subject("loss"),
            s.say(
                f"the loss is divided by the {calls:g} accumulation steps twice ({term.describe()}"
                f" per backward call, {calls:g} calls per step: 1/{calls:g}²), so "
                f"{settings.kind}'s step is {calls:g}× smaller than its learning rate says"
            ),
            f"divide the loss by {calls:g} once (in the loss or at backward, not both)",
            value=term.factor,
            threshold=1 / calls,
            evidence=(f"loss: {term.describe()}",),
        ),
        [s.steps[0].step],
    )


def _scaled(
    run: WatchRun, s: Series, term: LossTerm, settings: OptimizerSettings, t: Thresholds
) -> Finding | None:
    """A mean loss multiplied by a constant F >= 2 on its way to backward (a loss scale for
    float16 kept by hand, or a weight), whose first updates were too large by about F: the
    update ratio GS419 measured, divided by F, is a healthy one (within 10× of 1e-3). The
    gradients reached the step F times the loss's own (not unscaled), so the step is lr × F.
    An lr too high by far more or far less than F (gradients divided by it, and an lr too
    high on its own) stays GS419's."""
    if term.reduction != "mean" or not finite(term.factor) or term.factor < 2:
        return None
    subject = s.subject("learning-rate")
    ratios = [f.value for f in lr_too_high(run, t) if f.subject == subject and f.value]
    if not ratios or not HEALTHY_RATIO / 10 <= ratios[0] / term.factor < t.update_ratio_warn:
        return None  # S does not account for the excess: gradients divided, an lr too high
    factor, lr = f"{term.factor:g}", max(s.steps[0].lrs, default=math.nan)
    return about(
        RULES["GS438"].finding(
            s.subject("loss"),
            s.say(
                f"the loss is multiplied by {factor} before its backward ({term.describe()}) "
                f"and the gradients reach {settings.kind} undivided: its step is lr × "
                f"{factor} the loss's gradient, an effective lr of {num(lr * term.factor)} "
                f"where lr = {num(lr)}; the first updates moved the weights by "
                f"{ratios[0]:.3g} of their norm, {num(ratios[0] / term.factor)} once divided "
                f"by {factor}"
            ),
            f"a loss scale (float16 kept by hand): divide every gradient by {factor} after "
            "the backward and before optimizer.step() (after the overflow check); a weight "
            f"meant on the loss: divide the learning rate by {factor}",
            value=term.factor,
            evidence=(f"loss: {term.describe()}", f"{settings.kind} lr {num(lr)} at step 1"),
        ),
        [s.steps[0].step],
    )


def _harm(run: WatchRun, s: Series, t: Thresholds) -> str | None:
    """What says the summed loss's large steps hurt: the loss non-finite, an early
    blow-up, or the lr-too-high verdict on this optimizer's first steps."""
    bad = next((r for r in s.live() if r.loss is not None and not math.isfinite(r.loss)), None)
    if bad is not None:
        return f"the loss went non-finite at step {bad.step}"
    blowup = early_blowup_of(s, t)
    if blowup is not None:
        return "the loss blew up in the first steps"
    subject = s.subject("learning-rate")
    if any(f.subject == subject for f in lr_too_high(run, t)):
        return "the first updates moved the weights by a large fraction of their norm"
    return None
