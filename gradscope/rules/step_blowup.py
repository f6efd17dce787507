"""The early blow-up (GS414): a fresh model's loss that rises far above where it started
in the first steps, with the gradient norm. Other rules ask `early_blowup_of` so as not to
call the same rise a spike or a run without progress. Pure functions, no torch."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import (
    Series,
    about,
    by_optimizer,
    clip_note,
    finite,
    lr_text,
    robust_sigma,
    several,
    trend_doubt,
    window,
)
from gradscope.steps.meaning import OptimizerSettings
from gradscope.steps.records import StepRecord, WatchRun


@dataclass(frozen=True)
class Blowup:
    """An optimizer's loss that rose far above its first steps' level early on."""

    steps: list[StepRecord]
    """The series' live steps with a finite loss."""
    base: float
    """Median loss of the first 3 steps."""
    at: int
    """Index in `steps` of the top of the rise (of the 3-step median)."""
    peak: float
    """The 3-step median loss there."""
    norm_base: float
    norm_at: StepRecord
    """The step of the largest gradient norm of the rise."""
    end: float | None
    """Median loss of the last steps, when there are enough after the top; else None."""
    end_from: int
    recovered: bool | None
    strong: bool
    """The loss rose blowup-loss-ratio× with the norm; else a milder rise that stuck."""


def _blowup(s: Series, t: Thresholds) -> Blowup | None:
    steps = [r for r in s.live() if finite(r.loss)]
    losses = [r.loss for r in steps if r.loss is not None]
    if len(losses) < 6:
        return None
    base = _start(steps, losses, t)
    if base <= 0 or t.blowup_loss_ratio <= 1:
        return None
    logged = all(v > 0 for v in losses)
    noise = robust_sigma([math.log(v) for v in losses] if logged else losses)
    limit = min(len(losses) - 1, int(t.blowup_window))
    med3 = {i: statistics.median(losses[i - 1 : i + 2]) for i in range(4, limit)}

    def rise(m: float) -> float:  # in robust sigmas of the step-to-step noise
        return (math.log(m / base) if logged else m - base) / noise if noise > 0 else math.inf

    # beyond 3 sigmas with the norm's confirmation, 5 without it: the highest 3-step
    # median of 100 noisy steps over a low first step reaches 3 sigmas by chance
    risen = [
        i for i, m in med3.items() if m >= min(t.blowup_loss_ratio, t.blowup_rise_ratio) * base
    ]
    risen = [i for i in risen if rise(med3[i]) > 3]
    at = max(risen, key=lambda i: med3[i], default=-1)
    if at < 0 or _recurs(steps, losses, at, base, med3[at]):
        return None  # no rise, or one the data repeats
    # the norm during the rise, after the first 3 steps (a fresh model's larger first
    # norms are its transient, not the blow-up)
    norms = [r for r in steps[3 : at + 2] if not math.isnan(r.grad_norm)]
    finite_norms = [r.grad_norm for r in s.live() if finite(r.grad_norm)]
    first = [r.grad_norm for r in s.live()[:3] if finite(r.grad_norm)]
    if not norms or not first:
        return None
    norm_base = min(statistics.median(first), statistics.median(finite_norms))
    norm_at = max(norms, key=lambda r: r.grad_norm)
    w = window(len(losses))
    end, recovered = None, None
    if len(losses) - at - 1 >= w:
        end = statistics.median(losses[-w:])
        recovered = end <= base * (1 - t.blowup_recover_fall)
    strong = (
        med3[at] >= t.blowup_loss_ratio * base
        and norm_base > 0
        and norm_at.grad_norm >= t.blowup_norm_ratio * norm_base
    )
    if not strong and (recovered is not False or rise(med3[at]) <= 5):
        return None  # a milder rise counts only if it stuck and is far beyond the noise
    return Blowup(
        steps, base, at, med3[at], norm_base, norm_at, end, len(losses) - w, recovered, strong
    )


def _recurs(
    steps: list[StepRecord], losses: list[float], at: int, base: float, peak: float
) -> bool:
    """The loss came back to where it started after the rise and later rose again by at
    least half as much (on the log scale the rise is read on), with no learning rate raised
    in between: the rise is a pattern the data repeats (an online learner stepping along a
    sequence whose every pass begins with the same hard stretch), not a fresh model's
    blow-up, which happens once. A warm restart that re-raises the lr does not count."""
    if peak <= base or base <= 0:
        return False
    med3 = {i: statistics.median(losses[i - 1 : i + 2]) for i in range(1, len(losses) - 1)}
    back = next((i for i in range(at + 1, len(losses) - 1) if med3[i] <= base), None)
    if back is None:
        return False
    lrs = [max(r.lrs, default=math.nan) for r in steps]
    again = math.sqrt(peak * base)  # half the rise, in log terms
    for i in range(back + 1, len(losses) - 1):
        if lrs[i] > lrs[back]:
            return False
        if med3[i] >= again:
            return True
    return False


def _start(steps: list[StepRecord], losses: list[float], t: Thresholds) -> float:
    """Where the loss started: the first 3 steps' median, or step 1's loss (before any
    update) where lower, unless the first updates were too small to matter."""
    base = statistics.median(losses[:3])
    return base if _first_updates_small(steps, t) else min(losses[0], base)


def _first_updates_small(steps: list[StepRecord], t: Thresholds) -> bool:
    """The two updates before the second and third losses moved every tensor by less than
    update-ratio-warn of its norm (measured): the first three losses are then three batches of
    one model, and step 1's alone is no level to rise from (a multi-task run's tasks of very
    different scale: one easy task first would read as a blow-up). Not measured: False."""
    measured = [r.update_ratios for r in steps[:2] if r.update_ratios]
    values = [v for ratios in measured for v in ratios if math.isfinite(v)]
    return len(measured) == 2 and bool(values) and max(values) < t.update_ratio_warn


def early_blowup_of(s: Series, t: Thresholds) -> Blowup | None:
    """GS414's verdict on one series: none for a series named as one of several."""
    return None if s.name else _blowup(s, t)


@rule(
    "GS414",
    "early-blowup",
    Severity.WARNING,
    "progress",
    Stage.WATCH,
    "watch: in the first steps the loss rose far above where it started, with the gradient norm; "
    "an error when the loss never came back below its start",
    example="a learning rate 100 times too high that a warm-up hides later",
    fix="lower the learning rate or lengthen the warm-up, so a fresh model's first updates stay "
    "small",
    thresholds=(
        Threshold(
            "blowup-window",
            100,
            "an optimizer's first this many steps are where an early blow-up is looked for",
        ),
        Threshold(
            "blowup-loss-ratio",
            1.5,
            "the loss (median of 3 steps) rose this many times above its first steps'...",
        ),
        Threshold(
            "blowup-norm-ratio",
            5.0,
            "...with the gradient norm this many times its first steps' median",
        ),
        Threshold(
            "blowup-rise-ratio",
            1.2,
            "a milder rise, without the norm, counts when the loss never recovered",
        ),
        Threshold(
            "blowup-recover-fall",
            0.25,
            "error when the loss's last steps never got this fraction below where it started "
            "(else warning)",
        ),
        "update-ratio-warn",
    ),
    objectives=(
        "a single recognised objective (every term of one kind and sign: a cross-entropy, "
        "an MSE), the only kind whose rise means worse; a custom or multi-term one (an RL "
        "loss whose value targets grow) gets the facts as information, and so does a "
        "contrastive one (class-index targets that are places in the batch: MoCo's queue "
        "fills with harder negatives), and so does one whose terms target each other's inputs, "
        "detached (a VQ-VAE's codebook and commitment losses), and the loss of a model trained "
        "on its own predictions (it runs forward without gradients at most steps: an agent "
        "acting, a target made by the model it trains) or on a moving copy's (an EMA teacher "
        "run without gradients: DINO's targets spread out as its centre learns); one "
        "optimizer only (a GAN's losses rise by design)"
    ),
)
def early_blowup(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """Within an optimizer's first blowup-window steps, the loss (median of 3 steps) rose to
    blowup-loss-ratio times where it started with the gradient norm at blowup-norm-ratio times
    its usual value, beyond 3 robust sigmas of the noise; or a milder rise (blowup-rise-ratio, 5
    sigmas) that never came back. An error when the last steps' loss is not blowup-recover-fall
    below the start. The start is the first 3 steps' median, or step 1's loss where lower,
    unless the first two updates moved no tensor by update-ratio-warn of its norm (then the
    three are batches of one model: tasks of different scale). A rise the loss repeats by
    half as much after coming back to its start, with no lr raised in between, is the data's
    pattern (an online learner's every pass over a sequence), not a blow-up. One optimizer
    only (a GAN's losses rise by design). Judged only for a
    single recognised objective (one loss kind): a custom or multi-term one (an RL loss whose
    value targets grow) gets the facts as information."""
    # Judged only with one optimizer, as GS415: a GAN's G loss rises early by design (its D
    # learns), with its norm.
    if several(run):
        return []
    out = []
    for s in by_optimizer(run):
        b = _blowup(s, t)
        if b is None:
            continue
        top = b.steps[b.at]
        finding = this.finding(
            s.subject("loss"),
            s.say(_blowup_message(b)),
            _blowup_advice(b, run.settings_of(s.index)),
            value=b.peak / b.base,
            threshold=t.blowup_loss_ratio,
            evidence=_blowup_evidence(b),
        )
        doubt = trend_doubt(run, s)
        if doubt is not None:
            finding = replace(
                finding,
                severity=Severity.INFO,
                advice=f"not judged: {doubt}; a term whose weight a schedule raises (a KL "
                "or a penalty annealed up from 0) lifts the loss by design; if it is meant "
                "to fall, " + finding.advice,
            )
        elif b.recovered is False:
            finding = replace(finding, severity=Severity.ERROR)
        out.append(about(finding, (top.step, b.norm_at.step)))
    return out


def _blowup_message(b: Blowup) -> str:
    """How far the loss rose, with the norm, and whether it came back."""
    top = b.steps[b.at]
    message = (
        (
            "the loss blew up in the first steps: "
            if b.strong
            else "in the first steps the loss rose above where it started: "
        )
        + f"{num(b.peak)} around step {top.step} "
        f"(median of 3 steps), {b.peak / b.base:.3g}× the {num(b.base)} it started at, "
        f"with the gradient norm at {num(b.norm_at.grad_norm)} at step "
        f"{b.norm_at.step} ({b.norm_at.grad_norm / b.norm_base:.3g}× its usual "
        f"{num(b.norm_base)})"
    )
    if b.recovered is False and b.end is not None:
        where = f"{(b.base - b.end) / b.base:.0%} below" if b.end < b.base else "not below"
        return message + (
            f"; it never recovered: the median loss of its last steps "
            f"({b.steps[b.end_from].step}-{b.steps[-1].step}) is {num(b.end)}, {where} "
            "where it started"
        )
    if b.recovered:
        return message + (
            f"; the loss came back to {num(b.end)} by the end, but updates that large "
            "so early often leave the model on a worse plateau than a gentler start"
        )
    return message + "; the run ended before it could be seen to recover"


def _blowup_advice(b: Blowup, settings: OptimizerSettings | None) -> str:
    """Lower the lr or lengthen the warm-up; for LBFGS without a line search, whose step is
    lr times its curvature-scaled direction (no warm-up), give it the line search; with one,
    the step lowered the loss it was given, so the rise came from between the steps."""
    top = b.steps[b.at]
    clip = clip_note(b.steps[: b.at + 2])
    advice = (
        f"lower the learning rate (it was {lr_text(top)} at step {top.step}) or lengthen "
        "the warm-up, so the first updates of a fresh model stay small"
    )
    if settings is not None and line_searched(settings):
        return _between_steps_advice(settings, top.step)
    if settings is not None and settings.sizes_own_step:
        advice = (
            f"{settings.kind} without a line search steps lr × its curvature-scaled "
            "direction, which overshot here: pass line_search_fn='strong_wolfe' (a line "
            f"search then sizes each step), or lower lr (it was {lr_text(top)} at step "
            f"{top.step})"
        )
    if clip and clip != "scaled":
        advice += f"; clipping at max_norm {clip} was on and did not prevent it"
    return advice


def line_searched(settings: OptimizerSettings) -> bool:
    """A quasi-Newton optimizer whose every group sizes its steps by a line search (LBFGS
    with line_search_fn='strong_wolfe'): each step ends where the closure's loss is no
    higher than where it began, whatever lr (the first trial step's scale)."""
    return settings.sizes_own_step and all(g.line_search for g in settings.groups)


def _between_steps_advice(settings: OptimizerSettings, step: int) -> str:
    """Where a line-searched optimizer's loss rose: not its step size, but what changed
    between the end of one step and the start of the next."""
    return (
        f"look at what changed before step {step}: the weights written by the script "
        "between steps (a spline grid or coefficients re-fitted, a pruning or "
        "re-initialisation pass: check that the rewrite keeps the model's function), the "
        "batch (mini-batches: a full batch suits a line search), or a term of the loss; not "
        f"the learning rate: {settings.kind}'s line search only ends a step where the "
        "closure's loss is no higher than where the step began"
    )


def _blowup_evidence(b: Blowup) -> tuple[str, ...]:
    """The loss and the norm over the rise, and the learning rate at its start and top."""
    top = b.steps[b.at]
    shown = b.steps[: min(len(b.steps), max(b.at + 3, 8), 14)]
    return (
        f"loss at steps {shown[0].step}-{shown[-1].step}: " + ", ".join(num(r.loss) for r in shown),
        "gradient norm at those steps: " + ", ".join(num(r.grad_norm) for r in shown),
        f"learning rate at step {b.steps[0].step}: {lr_text(b.steps[0])}, "
        f"at step {top.step}: {lr_text(top)}",
    )
