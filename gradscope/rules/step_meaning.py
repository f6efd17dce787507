"""Verdicts from what a run's numbers mean (GS419): a learning rate too high for what the
optimizer's steps do to the weights; the loss's kind and bounds (GS418) are
step_maximised.py's. No torch.

Thresholds alone cannot tell a maximised loss from a falling one; the loss's graph
(`run.loss_kinds`) and the optimizer's param groups (`run.settings`) can. The optimizer's
settings and calls (decay, frozen members, zero_grad's place) are step_optimizer.py's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules.noise_advice import noise_advice
from gradscope.rules.registry import Stage, rule
from gradscope.rules.short_lived import short_lived
from gradscope.rules.step_blowup import early_blowup_of, line_searched
from gradscope.rules.step_common import (
    Series,
    about,
    at_chance,
    by_optimizer,
    loss_steps,
    several,
    stalled,
    step_list,
    trained_matrices,
    trend_doubt,
    window,
)
from gradscope.rules.step_dead import before_death, dead_from
from gradscope.rules.symptoms import LR_HIGH
from gradscope.steps.meaning import OptimizerSettings
from gradscope.steps.records import StepRecord, WatchRun

HEALTHY_RATIO = 1e-3
"""The update/weight ratio of a healthy step (‖Δw‖/‖w‖ per step): weights that turn over
in about a thousand steps. The usual rule of thumb, not a threshold of gradscope's."""
EARLY_STEPS = 100
"""The first steps, where a learning rate too high for a fresh model does its damage."""
FIT_FALL = 10.0
"""A loss that ended this many times below its first steps' fit its data: an order of
magnitude, where gradients that died fell a thousandfold."""


def _high_lr_steps(s: Series) -> list[StepRecord]:
    """The first EARLY_STEPS steps at which the learning rate was at least half its peak
    there: what a warm-up ramps to and a decay has not yet lowered."""
    early = [r for r in s.live() if r.step <= EARLY_STEPS]
    top = max((max(r.lrs, default=0.0) for r in early), default=0.0)
    if not top > 0:
        return early
    return [r for r in early if max(r.lrs, default=0.0) >= top / 2]


def _ratios(
    steps: list[StepRecord], members: list[int], losses: list[float]
) -> tuple[list[float], list[int]]:
    """Per matrix, its median update/weight ratio over those of `steps` that were sampled
    before its gradients died (a step that left it without gradient does not count: a
    ratio of 0 with no gradient is not a small learning rate); and the sampled steps.
    Where the loss fell tenfold (`_fitted`), gradients that fell a thousandfold with it did not
    die: the model fit its data (a large-margin softmax starts near 30-60 and is fit in a
    few steps), and the ratios of those first steps alone are not the run's."""
    sampled = [r for r in steps if r.update_ratios is not None]
    fitted = _fitted(losses)
    medians = []
    for i in members:
        values = [
            r.update_ratios[i]
            for r in (sampled if fitted else before_death(sampled, i))
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
    thresholds=(
        Threshold(
            "update-ratio-warn",
            0.02,
            "the weight matrices' median ‖Δw‖/‖w‖ over the first 100 steps at or above this (20× "
            "the healthy 1e-3), while the loss stalls",
        ),
        "update-ratio-high",
        "progress-min-fall",
    ),
    objectives=(
        "any for the update ratios (the weights rewritten every few steps; Adam's lr "
        "against the weights' scale) and for gradients that died while the loss did not "
        "fall; the loss's own signs (an early blow-up, the uniform guess, no fall) only "
        "for a single recognised objective of a single optimizer: a custom or multi-term "
        "one (an RL loss) may rise or stay flat while it learns, and a discriminator's "
        "(a GAN's, GAIL's) holds its equilibrium by design"
    ),
    explains=LR_HIGH,
)
def lr_too_high(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Over the first 100 steps the weight matrices' median update/weight ratio ‖Δw‖/‖w‖
    (each matrix's, at each of the first 10 steps and at least once in 8 after) is
    update-ratio-warn or more (a healthy step moves
    them by about 1e-3: weights that turn over in a thousand steps; at 0.05 they are replaced in
    20), the loss stopped improving (no progress-min-fall, or none over the second half), and
    something says the large steps did harm: the loss blew up early, sits at the uniform guess,
    did not fall at all, or stopped falling while warm-up still raised the learning rate (a
    small model learning fast takes large early steps too). Two signs suffice alone: a ratio of
    update-ratio-high or more (the weights rewritten every few steps; not for a quasi-Newton
    optimizer, LBFGS, whose step is sized by its curvature estimate), and, for Adam-like
    optimizers, whose step moves each element by about lr whatever the gradient, a peak lr at or
    above the weight matrices' initial rms (one step can move every weight by its whole initial
    size). The ratios are those from before a matrix's gradients died (a thousandfold below
    what they had, loss not 10× less); gradients that died in those first steps while the loss
    did not fall are a sign of harm whatever the objective (saturated tanh units, dead ReLUs),
    and this finding leads them (GS405, GS410, GS417). The lr-against-the-weights sign stands
    without a cause that only changes the gradients' size (GS412, GS435, GS438), so those
    do not supersede it. Ratios are judged at the steps where the lr is at least half its early
    peak. The message names the learning rate at the step where it peaked, the optimizer's step size
    (Adam: about lr per element; SGD with momentum μ: lr/(1-μ) × the gradient) and the learning
    rate that would bring the ratio near 1e-3. The loss's signs count only for one recognised
    objective of one optimizer (not an RL loss, nor a discriminator at its equilibrium). Zero-init
    matrices (LoRA's B), DARTS's alphas, sampled grids and (for the lr) tables have no scale.
    An optimizer built for one task or round (a meta-learning inner loop, a federated client:
    2 to fewer than warmup-steps steps inside a longer run) is not judged: fast adaptation is its
    purpose."""
    out = []
    for s, settings in _judged(run, t):
        high = _high_lr_steps(s)
        steps, losses = loss_steps(s)
        ratios, sampled = _ratios(high, _had_a_scale(run, trained_matrices(run, s)), losses)
        if not ratios:
            continue
        ratio = statistics.median(ratios)
        harm = _larger_than_weights(run, s, settings, high) if settings.adaptive else None
        if harm is None and ratio >= t.update_ratio_high and not settings.sizes_own_step:
            harm = f"each step rewrites {ratio:.0%} of every weight matrix"
        died = _died(run, s, high, losses, t) if ratio >= t.update_ratio_warn else ()
        if harm is None and died:
            harm = f"then the gradients of {len(died)} weight matrices died"
        if harm is None and ratio >= t.update_ratio_warn:
            harm = _harm(run, s, steps, losses, t)
        if harm is None:
            continue  # large early steps that did no harm: a small model learning fast
        finding = _lr_finding(run, s, settings, ratio, len(ratios), sampled, harm, t)
        if died:
            finding = replace(finding, evidence=(*finding.evidence, dead_evidence(died)))
        out.append(about(finding, sampled[:1]))
    return out


def _judged(run: WatchRun, t: Thresholds) -> Iterator[tuple[Series, OptimizerSettings]]:
    """The optimizers GS419 judges: known settings, not manual updates, not built for one
    task or round (`short_lived`: fast adaptation is their purpose), not sized by a line
    search (LBFGS with strong_wolfe: each step lowers the loss it is given, whatever lr)."""
    brief = short_lived(run, t)
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        if settings is None or line_searched(settings):
            continue
        if not (s.manual(run) or s.index in brief):
            yield s, settings


def _had_a_scale(run: WatchRun, members: list[int]) -> list[int]:
    """The matrices whose ‖Δw‖/‖w‖ says something about the lr: one initialised to exactly
    zero (LoRA's B, a zero-init output projection or gate) grows from nothing, its ratio
    about 1/t whatever the lr (1 at step 1, 0.5 at step 2); a softmax's own logits
    (DARTS's architecture weights, started near 0 for a uniform choice) are in nats, their
    initial values no scale of theirs; an input the script optimises beside a fixed network
    (a feature-visualisation image started at 0.01, a soft prompt copied from the
    vocabulary: `optimised_input`) holds data, whose scale no layer's initialisation set;
    so does a grid grid_sample interpolates (a voxel grid, a feature plane: `sampled_grid`)."""
    return [
        i
        for i in members
        if run.params[i].weight_norm != 0
        and not run.params[i].logits_table
        and not run.params[i].optimised_input
        and not run.params[i].sampled_grid
    ]


def _died(
    run: WatchRun, s: Series, high: list[StepRecord], losses: list[float], t: Thresholds
) -> tuple[tuple[str, int], ...]:
    """(name, step) of the trained weight matrices whose gradients died in the first
    steps (a thousandfold below what they had, to the end of them) while the loss did not
    fall by progress-min-fall: what large steps do to saturating units, whatever the
    objective (a model that fit its data has tiny gradients too, and a loss near 0). Under
    a quasi-Newton optimizer the fall is measured from the loss before its first step
    (`_before_converging`)."""
    if len(losses) < 10:
        return ()
    w = window(len(losses))
    first, last = statistics.median(losses[:w]), statistics.median(losses[-w:])
    first = _before_converging(run, s, losses, first)
    if last < first - t.progress_min_fall * abs(first) or last == 0:
        return ()  # the loss fell, or sits at exactly 0 (a margin met: no gradient by right)
    out = []
    for i in trained_matrices(run, s):
        step = dead_from(high, i)
        if step is not None:
            out.append((run.params[i].name, step))
    return tuple(out)


def _before_converging(run: WatchRun, s: Series, losses: list[float], first: float) -> float:
    """Where the loss's fall is measured from: `first` (its first steps' median), or the
    loss before the first step under a quasi-Newton optimizer (LBFGS), one of whose
    steps runs up to max_iter iterations and may converge, so that its first steps'
    median is already the converged loss (a classifier's sits on its labels' noise)."""
    settings = run.settings_of(s.index)
    return losses[0] if settings is not None and settings.sizes_own_step else first


def _fitted(losses: list[float]) -> bool:
    """The loss ended at a FIT_FALL-th of its first steps' or less (at exactly 0: a margin
    met): the model fit its data, and gradients that fell a thousandfold fell with it, not
    because its units died. A loss that fell by a few percent, or rose first and came part
    of the way back, is no fit. Ten losses at least: fewer say nothing of a fall."""
    if len(losses) < 10:
        return False
    first, last = statistics.median(losses[:5]), statistics.median(losses[-window(len(losses)) :])
    return first > 0 and 0 <= last <= first / FIT_FALL


DEAD_EVIDENCE = "gradients that died after the large steps (from step): "
"""How GS419's evidence names them; rules/causes.py reads which parameters it explains."""


def dead_evidence(died: tuple[tuple[str, int], ...]) -> str:
    return DEAD_EVIDENCE + ", ".join(f"{name} ({step})" for name, step in died)


def _larger_than_weights(
    run: WatchRun, s: Series, settings: OptimizerSettings, high: list[StepRecord]
) -> str | None:
    """Adam-like optimizers move each element by about lr per step whatever the gradient:
    an lr at or above the weight matrices' own initial rms (median over them) lets one
    step move every weight by its whole initial size. A table read by index (`looked_up`:
    an embedding, a hash grid's ±1e-4 entries) is left out: its initial scale is its own
    choice, not a fan-in's, and no measure of the lr."""
    rows = []
    for i in _had_a_scale(run, trained_matrices(run, s)):
        p = run.params[i]
        if p.weight_norm is None or p.weight_norm <= 0 or p.group is None or p.looked_up:
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
        if settings.known
        else "its step's size per lr is its own (measured here, not assumed)"
    )
    scale = (
        f"about {HEALTHY_RATIO:g} is healthy: at {ratio:.2g} the weights are replaced in "
        f"about {max(1.0, 1 / ratio):.0f} steps"
    )
    advice = (
        f"lower the learning rate about {ratio / HEALTHY_RATIO:.0f}× (peak lr ≈ "
        f"{num(lr * HEALTHY_RATIO / ratio)}), or lengthen the warm-up; {settings.kind}: "
        + per_element
    )
    if settings.noise is not None:
        advice = f"{advice}; {noise_advice(settings.noise, lr / (1 - (momentum or 0.0)))}"
    if settings.sizes_own_step:  # no healthy ratio: a quasi-Newton step may be the whole way
        scale, advice = "a quasi-Newton step may move them far", quasi_newton_advice(settings)
    return RULES["GS419"].finding(
        s.subject("learning-rate"),
        s.say(
            f"the learning rate is too high for these weights: at steps {sampled[0]}-"
            f"{sampled[-1]}, with lr up to {num(lr)} (step {peak.step}), each update moved "
            f"the weight matrices by {ratio:.3g} of their norm (median of {matrices}; "
            f"{scale}); {harm}"
        ),
        advice,
        value=ratio,
        threshold=t.update_ratio_warn,
        evidence=(f"sampled steps at the high learning rate: {step_list(sampled)}",),
    )


def quasi_newton_advice(settings: OptimizerSettings) -> str:
    """LBFGS's lr multiplies its curvature-scaled direction (1: the quasi-Newton step
    itself); without a line search nothing shortens a step that overshoots."""
    if any(g.line_search for g in settings.groups):
        return f"lower lr ({settings.kind} starts its line search at lr × the quasi-Newton step)"
    return (
        f"{settings.kind} without a line search steps lr × its curvature-scaled direction, "
        "which overshot here: pass line_search_fn='strong_wolfe' (a line search then sizes "
        "each step), or lower lr to 1 or below"
    )


def _harm(
    run: WatchRun, s: Series, steps: list[StepRecord], losses: list[float], t: Thresholds
) -> str | None:
    """What says the large steps hurt, not a fast learner: the loss rose above where it
    started, sits at the uniform guess, did not fall at all, or stopped falling while
    warm-up still raised the learning rate. None: no such sign."""
    if len(losses) < 10 or several(run) or trend_doubt(run, s) is not None:
        return None  # a custom, multi-term or adversarial objective's trend says nothing alone
    if early_blowup_of(s, t) is not None:
        return "the loss blew up in the first steps"
    if not stalled(losses, t):
        return None  # still improving: a small model learning fast
    w = window(len(losses))
    last = statistics.median(losses[-w:])
    chance = at_chance(run, s, last)
    if chance:
        return "the loss stopped improving" + chance
    first = max(statistics.median(losses[:5]), statistics.median(losses[:w]))
    first = _before_converging(run, s, losses, first)
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


def lr_above_weights(run: WatchRun, subject: str) -> bool:
    """GS419's finding with this subject is about an Adam-like optimizer whose lr is at or
    above its weight matrices' initial rms: a fact about the lr alone, that no cause which
    only changes the gradients' size (not resetting them, a sum reduction) explains."""
    for s in by_optimizer(run):
        settings = run.settings_of(s.index)
        if s.subject("learning-rate") == subject and settings is not None and settings.adaptive:
            return _larger_than_weights(run, s, settings, _high_lr_steps(s)) is not None
    return False
