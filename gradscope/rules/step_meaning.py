"""Verdicts from what a run's numbers mean (GS418-GS422): the loss's kind and bounds, the
optimizer's settings, the order of the script's calls. No torch.

Thresholds alone cannot tell a maximised loss from a falling one, a decay that erases
the weights from vanishing gradients, or a step that applies no gradient from a
parameter that never learns; the loss's graph (`run.loss_kinds`) and the optimizer's
param groups (`run.settings`) can.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import (
    Series,
    about,
    at_chance,
    by_optimizer,
    finite,
    several,
    step_list,
)
from gradscope.rules.steps import early_blowup_of
from gradscope.steps.meaning import GroupSettings, OptimizerSettings
from gradscope.steps.records import StepRecord, WatchRun, common_module

HEALTHY_RATIO = 1e-3
"""The update/weight ratio of a healthy step (‖Δw‖/‖w‖ per step): weights that turn over
in about a thousand steps. The usual rule of thumb, not a threshold of gradscope's."""
EARLY_STEPS = 100
"""The first steps, where a learning rate too high for a fresh model does its damage."""


def _window(n: int) -> int:
    return max(5, min(50, n // 5))


def _losses(s: Series) -> tuple[list[StepRecord], list[float]]:
    steps = [r for r in s.live() if finite(r.loss)]
    return steps, [r.loss for r in steps if r.loss is not None]


def _stalled(losses: Sequence[float], t: Thresholds) -> bool:
    """No improvement over the second half, or no fall of progress-min-fall overall."""
    if len(losses) < 10:
        return False
    w = _window(len(losses))
    first = max(statistics.median(losses[:5]), statistics.median(losses[:w]))
    mid = len(losses) // 2
    middle = statistics.median(losses[max(0, mid - w // 2) : mid + (w + 1) // 2])
    last = statistics.median(losses[-w:])
    fell = first != 0 and (first - last) / abs(first) >= t.progress_min_fall
    return not fell or last >= middle - t.progress_min_fall * abs(first) / 2


# -- GS418 ------------------------------------------------------------------------------
@rule(
    "GS418",
    "loss-maximised",
    Severity.ERROR,
    "objective",
    Stage.WATCH,
    "watch: the loss's graph shows a loss bounded below (cross-entropy, MSE, ...) negated, or "
    "maximize=True, and the values confirm the run ascends it",
    example="`loss = -F.cross_entropy(logits, y)` in a character-level language model: the loss "
    "goes -3.5 → -15.9 and the gradient norm grows 8×",
    fix="minimise the loss itself (remove the minus sign); a deliberate ascent keeps the loss "
    "positive and passes maximize=True to the optimizer",
    supersedes=("GS419",),  # a maximised loss's steps are large by what it optimises
)
def loss_maximised(run: WatchRun, t: Thresholds) -> list[Finding]:
    """The loss's own autograd graph shows a loss bounded below (cross-entropy, NLL of
    log_softmax, (binary) cross-entropy, MSE, L1, Huber) entering the value backward ran on
    negated, or the optimizer has maximize=True on a plain one; and the values confirm it: the
    loss went below the bound (the negated term outweighs the rest) and, in a run long enough to
    tell, kept falling (with maximize, rising). A cross-entropy can never be below 0, so the run
    is ascending it. Judged with one optimizer only: a GAN's minimax generator ascends by
    design."""
    # A loss bounded below (a cross-entropy, an MSE, ...) that the optimizer drives up: the
    # graph shows it negated (or the optimizer has maximize=True on a plain one), and the values
    # confirm it. Several optimizers (a GAN's minimax G) may ascend by design.
    if several(run):
        return []
    out = []
    for s in by_optimizer(run):
        kind = run.loss_kind(s.index)
        if kind is None:
            continue
        maximize = run.maximizes(s.index)
        bad = (
            [x for x in kind.terms if x.bound is not None and not x.negated]
            if maximize
            else kind.negated_terms()
        )
        steps, losses = _losses(s)
        if not bad or not losses or min(losses) >= 0:
            continue  # below 0 only when the negated term outweighs the rest
        w = _window(len(losses))
        first, last = statistics.median(losses[:w]), statistics.median(losses[-w:])
        if len(losses) >= 2 * w and last >= first:
            continue  # long enough to see it, and the ascent does not go on
        sign = -1 if maximize else 1  # the script's own loss values, as it printed them
        term = bad[0]
        name = term.kind.replace("_", "-")
        how = (
            f"the optimizer has maximize=True and the loss is {kind.describe()}"
            if maximize
            else f"the loss is {kind.describe()}: minimising it maximises the {name}"
        )
        finding = RULES["GS418"].finding(
            s.subject("loss"),
            s.say(
                f"the run maximises its {name}: {how}; the loss went from "
                f"{num(sign * (steps[0].loss or 0))} at step {steps[0].step} to "
                f"{num(sign * (steps[-1].loss or 0))} at step {steps[-1].step} (a {name} is "
                f"never below {num(term.bound)})"
            ),
            "drop maximize=True from the optimizer"
            if maximize
            else f"minimise the {name} itself: remove the minus sign (or the negative factor) "
            "in front of it; for a deliberate ascent, keep the loss positive and pass "
            "maximize=True to the optimizer",
            value=sign * last,
            threshold=term.bound,
            evidence=(
                f"loss graph: {kind.describe()}",
                f"median loss {num(sign * first)} over the first {w} steps, {num(sign * last)} "
                "over the last",
            ),
        )
        out.append(about(finding, [r.step for r in steps[:1]]))
    return out


# -- GS419 ------------------------------------------------------------------------------
def _matrices(run: WatchRun, s: Series) -> list[int]:
    """Weight matrices the optimizer trains: a bias or a norm's scale near 0 has a large
    ratio while healthy."""
    return [
        i
        for i in s.members
        if i < len(run.params)
        and len(run.params[i].shape) >= 2
        and run.params[i].requires_grad
        and run.params[i].in_optimizer
    ]


def _high_lr_steps(s: Series) -> list[StepRecord]:
    """The first EARLY_STEPS steps at which the learning rate was at least half its peak
    there: what a warm-up ramps to and a decay has not yet lowered."""
    early = [r for r in s.live() if r.step <= EARLY_STEPS]
    top = max((max(r.lrs, default=0.0) for r in early), default=0.0)
    if not top > 0:
        return early
    return [r for r in early if max(r.lrs, default=0.0) >= top / 2]


def _ratios(steps: list[StepRecord], members: list[int]) -> tuple[list[float], list[int]]:
    """Per matrix, its median update/weight ratio over those of `steps` that were sampled
    (a step that left it without gradient does not count); and the sampled steps."""
    sampled = [r for r in steps if r.update_ratios is not None]
    medians = []
    for i in members:
        values = [
            r.update_ratios[i]
            for r in sampled
            if r.update_ratios is not None
            and i < len(r.update_ratios)
            and math.isfinite(r.update_ratios[i])
            and (r.param_norms[i] or 0) > 0
        ]
        if values:
            medians.append(statistics.median(values))
    return medians, [r.step for r in sampled]


@rule(
    "GS419",
    "lr-too-high",
    Severity.WARNING,
    "progress",
    Stage.WATCH,
    "watch: in the first steps every update moves the weight matrices by a large fraction of "
    "their norm while the loss stops improving",
    example="nanoGPT's shakespeare_char recipe at 100× its learning rate (warm-up to 0.06): "
    "ratios 0.05-0.08 from step 1, the loss stuck near 2.9 where the stock run reaches "
    "2.4",
    fix="lower the peak learning rate by the factor given, or lengthen the warm-up",
    thresholds=("update-ratio-warn", "update-ratio-high", "progress-min-fall"),
)
def lr_too_high(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Over the first 100 steps the weight matrices' median update/weight ratio ‖Δw‖/‖w‖
    (measured on every one of those steps) is update-ratio-warn or more (a healthy step moves
    them by about 1e-3: weights that turn over in a thousand steps; at 0.05 they are replaced in
    20), the loss stopped improving (no progress-min-fall, or none over the second half), and
    something says the large steps did harm: the loss blew up early, sits at the uniform guess,
    did not fall at all, or stopped falling while warm-up still raised the learning rate (a
    small model learning fast takes large early steps too). Two signs suffice alone: a ratio of
    update-ratio-high or more (the weights rewritten every few steps), and, for Adam-like
    optimizers, whose step moves each element by about lr whatever the gradient, a peak lr at or
    above the weight matrices' initial rms (one step can move every weight by its whole initial
    size). Ratios are judged at the steps where the lr is at least half its early peak. The
    message names the learning rate at the step where it peaked, the optimizer's step size
    (Adam: about lr per element; SGD with momentum μ: lr/(1-μ) × the gradient) and the learning
    rate that would bring the ratio near 1e-3."""
    # While the learning rate is high in the first steps, each update moves the weight matrices
    # by update-ratio-warn of their norm or more (a healthy step: about 1e-3) and something says
    # it did harm; or by update-ratio-high or more, which rewrites the weights every few steps
    # whatever the loss does.
    out = []
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        if s.manual(run) or settings is None:
            continue
        high = _high_lr_steps(s)
        ratios, sampled = _ratios(high, _matrices(run, s))
        steps, losses = _losses(s)
        if not ratios:
            continue
        ratio = statistics.median(ratios)
        harm = _larger_than_weights(run, s, settings, high) if settings.adaptive else None
        if harm is None and ratio >= t.update_ratio_high:
            harm = f"each step rewrites {ratio:.0%} of every weight matrix"
        if harm is None and ratio >= t.update_ratio_warn:
            harm = _harm(run, s, steps, losses, t)
        if harm is None:
            continue  # large early steps that did no harm: a small model learning fast
        out.append(
            about(_lr_finding(run, s, settings, ratio, len(ratios), sampled, harm, t), sampled[:1])
        )
    return out


def _larger_than_weights(
    run: WatchRun, s: Series, settings: OptimizerSettings, high: list[StepRecord]
) -> str | None:
    """Adam-like optimizers move each element by about lr per step whatever the gradient:
    an lr at or above the weight matrices' own initial rms (median over them) lets one
    step move every weight by its whole initial size."""
    rows = []
    for i in _matrices(run, s):
        p = run.params[i]
        if p.weight_norm is None or p.weight_norm <= 0 or p.group is None:
            continue
        lrs = [r.lrs[p.group] for r in high if p.group < len(r.lrs)]
        if lrs:
            rows.append((max(lrs), p.weight_norm / math.sqrt(math.prod(p.shape) or 1)))
    if not rows:
        return None
    lr = statistics.median(r[0] for r in rows)
    rms = statistics.median(r[1] for r in rows)
    if lr < rms:
        return None
    return (
        f"{settings.kind} moves each element by about lr = {num(lr)} per step, {lr / rms:.3g}× "
        f"these matrices' initial rms {num(rms)}: one step can move every weight by more "
        "than its whole initial size"
    )


def _lr_finding(
    run: WatchRun,
    s: Series,
    settings: OptimizerSettings,
    ratio: float,
    matrices: int,
    sampled: list[int],
    harm: str,
    t: Thresholds,
) -> Finding:
    peak = max((r for r in s.live() if r.step <= EARLY_STEPS), key=lambda r: max(r.lrs, default=0))
    lr = max(peak.lrs, default=math.nan)
    momentum = settings.groups[0].momentum
    per_element = (
        "each element moves by about lr per step"
        if settings.adaptive
        else "each step is about lr × the gradient"
        + (f" / (1 - momentum {num(momentum)})" if momentum else "")
    )
    return RULES["GS419"].finding(
        s.subject("learning-rate"),
        s.say(
            f"the learning rate is too high for these weights: at steps {sampled[0]}-"
            f"{sampled[-1]}, with lr up to {num(lr)} (step {peak.step}), each update moved "
            f"the weight matrices by {ratio:.3g} of their norm (median of {matrices}; about "
            f"{HEALTHY_RATIO:g} is healthy: at {ratio:.2g} the weights are replaced in about "
            f"{max(1.0, 1 / ratio):.0f} steps); {harm}"
        ),
        f"lower the learning rate about {ratio / HEALTHY_RATIO:.0f}× (peak lr ≈ "
        f"{num(lr * HEALTHY_RATIO / ratio)}), or lengthen the warm-up; {settings.kind}: "
        + per_element,
        value=ratio,
        threshold=t.update_ratio_warn,
        evidence=(f"sampled steps at the high learning rate: {step_list(sampled)}",),
    )


def _harm(
    run: WatchRun, s: Series, steps: list[StepRecord], losses: list[float], t: Thresholds
) -> str | None:
    """What says the large steps hurt, not a fast learner: the loss rose above where it
    started, sits at the uniform guess, did not fall at all, or stopped falling while
    warm-up still raised the learning rate. None: no such sign."""
    if len(losses) < 10:
        return None
    if early_blowup_of(s, t) is not None:
        return "the loss blew up in the first steps"
    if not _stalled(losses, t):
        return None  # still improving: a small model learning fast
    w = _window(len(losses))
    last = statistics.median(losses[-w:])
    chance = at_chance(run, s, last)
    if chance:
        return "the loss stopped improving" + chance
    first = max(statistics.median(losses[:5]), statistics.median(losses[:w]))
    if first > 0 and (first - last) / first < t.progress_min_fall:
        return (
            f"the loss did not fall: median {num(first)} over its first steps, {num(last)} "
            f"over the last {w}"
        )
    lrs = [max(r.lrs, default=math.nan) for r in steps]
    top = max((v for v in lrs if math.isfinite(v)), default=math.nan)
    if not top > 0 or not lrs[0] <= top / 2:
        return None  # no warm-up to watch the loss against
    peak = next(i for i, v in enumerate(lrs) if v >= 0.9 * top)
    if peak < 10:
        return None
    half = peak // 2
    smooth = [statistics.median(losses[max(0, i - 1) : i + 2]) for i in range(half + 1)]
    best = min(range(half + 1), key=lambda i: smooth[i])
    late = statistics.median(losses[half : peak + 1])
    if late < smooth[best]:
        return None  # the loss still fell while the lr rose: warm-up did its job
    return (
        f"the loss stopped falling by step {steps[best].step} ({num(smooth[best])}) while "
        f"warm-up still raised the learning rate from {num(lrs[best])} to {num(lrs[peak])} "
        f"(step {steps[peak].step}): median {num(late)} over steps {steps[half].step}-"
        f"{steps[peak].step}"
    )


# -- GS420 ------------------------------------------------------------------------------
def _equilibrium(g: GroupSettings, adaptive: bool, grad_rms: float | None) -> float | None:
    """The weight magnitude at which the optimizer's steps balance the decay: AdamW's
    per-element step (≈ lr) against lr × wd × |w| gives 1/wd; an L2 decay added to the
    gradient balances it at |g| / wd. None where there is no decay."""
    if g.weight_decay <= 0 or not math.isfinite(g.weight_decay):
        return None
    if g.decoupled:
        return 1.0 / g.weight_decay if adaptive else None
    return None if grad_rms is None else grad_rms / g.weight_decay


def _grad_rms(run: WatchRun, s: Series, i: int) -> float | None:
    values = [
        r.param_norms[i]
        for r in s.live()
        if i < len(r.param_norms) and finite(r.param_norms[i]) and (r.param_norms[i] or 0) > 0
    ]
    if not values:
        return None
    size = math.prod(run.params[i].shape) or 1
    return statistics.median(v for v in values if v is not None) / math.sqrt(size)


@rule(
    "GS420",
    "decay-too-strong",
    Severity.ERROR,
    "decay",
    Stage.WATCH,
    "watch: weight decay pulls the weights far below where they started, faster than the "
    "optimizer's steps hold them up, and the loss stalls",
    example="AdamW(weight_decay=100) at lr 5e-4 on a character-level model: 5% of every weight "
    "gone per step, the loss at ln 27 = 3.30",
    fix="a weight_decay in AdamW's usual 0.01-0.1; no decay on biases and norm scales",
    thresholds=("progress-min-fall",),
    supersedes=("GS419",),  # the decay's own step is the large update, not the lr
)
def decay_too_strong(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A param group's weight decay has an equilibrium below the initial rms of most of its
    weight matrices, and the loss stalls (no progress-min-fall, or none over the second half).
    Decoupled decay (AdamW) removes lr × wd of every weight per step while Adam's step moves
    each element by about lr, so the two balance at |w| ≈ 1/wd; an L2 decay (added to the
    gradient) balances the gradient at |w| ≈ |grad|/wd. Below the weights' own scale the decay
    erases them: the gradients shrink with them (a vanishing symptom) and the loss sits near the
    uniform guess."""
    # Weight decay that pulls the weight matrices far below where they started, faster than the
    # optimizer's steps can hold them up, while the loss stalls.
    out = []
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        steps, losses = _losses(s)
        if settings is None or not _stalled(losses, t):
            continue
        for k, g in enumerate(settings.groups):
            found = _erased(run, s, k, g, settings.adaptive)
            if found is None:
                continue
            eq, init, names = found
            w = _window(len(losses))
            last = statistics.median(losses[-w:])
            lrs = s.steps[-1].lrs
            lr = lrs[k] if k < len(lrs) else g.lr  # the schedule's, at the last step
            shrink = lr * g.weight_decay if g.decoupled else 0.0
            how = (
                f"{settings.kind}'s decoupled weight_decay {num(g.weight_decay)} at lr "
                f"{num(lr)} removes {shrink:.3g} of every weight per step (half-life "
                f"{math.log(2) / shrink:.0f} steps); its steps (≈ lr per element) hold a weight "
                f"up only to |w| ≈ 1/wd = {num(eq)}"
                if g.decoupled and shrink > 0
                else f"{settings.kind}'s weight_decay {num(g.weight_decay)} (L2, added to the "
                f"gradient) outweighs the gradients until |w| ≈ |grad| / wd = {num(eq)}"
            )
            finding = RULES["GS420"].finding(
                s.subject(f"param group {k}"),
                s.say(
                    f"weight decay erases the weights: {how}, below these matrices' initial "
                    f"rms {num(init)}; the loss stalled at {num(last)}" + at_chance(run, s, last)
                ),
                f"lower weight_decay (AdamW's usual values are 0.01-0.1; here at most about "
                f"{num(1 / init / 10 if g.decoupled else g.weight_decay * eq / init / 10)}), "
                "and keep biases and norm scales out of the decayed group",
                value=g.weight_decay,
                threshold=(1 / init) if g.decoupled else None,
                evidence=(
                    f"decayed matrices: {', '.join(names[:4])}"
                    + (f" (+{len(names) - 4} more)" if len(names) > 4 else ""),
                    f"median loss {num(last)} over the last {w} steps",
                ),
            )
            out.append(about(finding, [steps[0].step] if steps else []))
    return out


def _erased(
    run: WatchRun, s: Series, group: int, g: GroupSettings, adaptive: bool
) -> tuple[float, float, list[str]] | None:
    """(equilibrium, median initial rms, names) when the decay's equilibrium lies below
    the initial rms of most of the group's matrices: even steps all in one direction
    cannot hold them at the size they started at."""
    members = [i for i in _matrices(run, s) if run.params[i].group == group]
    rows = []
    for i in members:
        p = run.params[i]
        if p.weight_norm is None or p.weight_norm <= 0:
            continue
        eq = _equilibrium(g, adaptive, None if g.decoupled else _grad_rms(run, s, i))
        if eq is not None:
            rows.append((eq, p.weight_norm / math.sqrt(math.prod(p.shape) or 1), p.name))
    below = [r for r in rows if r[0] < r[1]]
    if not rows or len(below) * 2 <= len(rows):
        return None
    return (
        statistics.median(r[0] for r in below),
        statistics.median(r[1] for r in below),
        [r[2] for r in below],
    )


# -- GS421 ------------------------------------------------------------------------------
@rule(
    "GS421",
    "frozen-in-optimizer",
    Severity.INFO,
    "update-ratio",
    Stage.WATCH,
    "watch: parameters with requires_grad=False sit in an optimizer's param groups and never move",
    example="`model.encoder.requires_grad_(False)` after `Adam(model.parameters())`",
    fix="nothing if meant; else requires_grad_(True). Passing only the trainable parameters makes "
    "the intent plain and saves the optimizer's state",
)
def frozen_in_optimizer(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Parameters with requires_grad=False sit in an optimizer's param groups and got no
    gradient in any step: the optimizer keeps them and never moves them. Often meant (a frozen
    backbone passed as model.parameters()), so information."""
    # Parameters in an optimizer's param groups with requires_grad=False that never got a
    # gradient: they never move. Often meant (a frozen backbone), so information.
    out = []
    for s in by_optimizer(run):
        if s.manual(run):
            continue
        frozen = [
            run.params[i].name
            for i in s.members
            if i < len(run.params)
            and not run.params[i].requires_grad
            and run.params[i].in_optimizer
            and not run.tensors.ever_had_grad(i)
        ]
        if not frozen:
            continue
        modules = sorted({n.rpartition(".")[0] or n for n in frozen})
        finding = RULES["GS421"].finding(
            s.subject(common_module(frozen) or "parameters"),
            s.say(
                f"{len(frozen)} parameter(s) in {run.optimizer_label(s.index)}'s param groups "
                f"are frozen (requires_grad=False), get no gradient and never move: "
                + ", ".join(modules[:4])
                + (f" (+{len(modules) - 4} more modules)" if len(modules) > 4 else "")
            ),
            "fine if meant (a frozen backbone); else call requires_grad_(True) on them. To make "
            "the intent plain and save the optimizer's state, give the optimizer only "
            "[p for p in model.parameters() if p.requires_grad]",
            value=float(len(frozen)),
            evidence=(f"frozen parameters: {', '.join(frozen[:6])}",),
        )
        out.append(finding)
    return out


# -- GS422 ------------------------------------------------------------------------------
@rule(
    "GS422",
    "zero-grad-before-step",
    Severity.ERROR,
    "reset-order",
    Stage.WATCH,
    "watch: zero_grad() ran between backward() and step(), so the steps apply no gradient",
    example="`loss.backward(); optimizer.zero_grad(); optimizer.step()`",
    fix="call zero_grad() before loss.backward() or right after optimizer.step()",
)
def zeroed_before_step(run: WatchRun, t: Thresholds) -> list[Finding]:
    """At more than half the steps zero_grad() ran after the step's backward calls and before
    step(), with gradients there to clear: the step applied none of them (momentum, Adam's
    moments or decay may still move the weights a little, so the run looks alive). The step's
    loss is still recorded: the backward calls before the zero_grad belong to it."""
    # zero_grad ran after the step's backward calls and before step(), at most steps: every
    # update applies no gradient (Adam's moments, decay and momentum still move the weights a
    # little, so the run looks alive).
    out = []
    for s in by_optimizer(run):
        steps = s.live()
        zeroed = [r for r in steps if r.zeroed]
        if not steps or len(zeroed) * 2 <= len(steps):
            continue
        calls = statistics.median(r.backward_calls or 1 for r in zeroed)
        finding = RULES["GS422"].finding(
            s.subject("optimizer.zero_grad"),
            s.say(
                f"zero_grad() ran between backward() and step() at {len(zeroed)} of "
                f"{len(steps)} steps: it cleared the gradients of the step's "
                f"{calls:g} backward call(s), so every update applied no gradient"
            ),
            "call optimizer.zero_grad() before loss.backward() (or right after "
            "optimizer.step()), never between backward() and step()",
            value=len(zeroed) / len(steps),
            threshold=0.5,
            evidence=(
                f"steps whose gradients were cleared before step(): "
                f"{step_list([r.step for r in zeroed])}",
                f"step {zeroed[0].step}: loss {num(zeroed[0].loss)}, gradient norm at the step "
                f"{num(zeroed[0].grad_norm)}",
            ),
        )
        out.append(about(finding, (r.step for r in zeroed)))
    return out
