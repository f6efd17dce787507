"""Whether a run got anywhere (GS415: the loss no better than where it started) and what
stopped learning on the way (GS417: a parameter whose gradients ended). Pure functions of
a `WatchRun`, no torch."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules import (
    all_stopped,
    floor_stop,
    no_signal,
    routed,
    shift_invariance,
    stall_advice,
    zero_point,
)
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_blowup import early_blowup_of
from gradscope.rules.step_common import (
    Series,
    about,
    at_chance,
    by_optimizer,
    clip_note,
    finite,
    inspect_command,
    lr_text,
    middle_median,
    module_of,
    robust_sigma,
    several,
    trend_doubt,
    window,
)
from gradscope.rules.step_trends import vanishing
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun
from gradscope.steps.tensor_track import Learned


# -- GS415 -----------------------------------------------------------------------------
@rule(
    "GS415",
    "no-progress",
    Severity.WARNING,
    "progress",
    Stage.WATCH,
    "watch: the loss over the last steps is no better than over the first steps",
    example="step() updating a copy of the model rather than the one the loss uses, or targets "
    "shuffled apart from their inputs",
    fix="check that step() moves the model the loss is computed on and that targets match inputs; "
    "a learning rate too high sits at chance level, one too small never moves the loss; "
    "ignore it for a loss not meant to fall",
    thresholds=(
        Threshold(
            "progress-min-steps",
            50,
            "steps an optimizer needs before its progress is judged",
        ),
        Threshold(
            "progress-min-fall",
            0.05,
            "the last steps' median loss less than this fraction below the first steps' ended no "
            "better than it started",
        ),
        Threshold(
            "progress-stall-fall",
            0.25,
            "info: fell less than this and flat over the second half",
        ),
    ),
    objectives=(
        "a single recognised objective (a cross-entropy, an MSE) with a sign from the run "
        "that the model did not learn (the uniform guess, no gradient reaching what "
        "step() updates, update ratios below 1e-5, gradients that died); a custom or "
        "multi-term objective, a contrastive one (targets that are places in the batch), "
        "one of a model trained on its own predictions (run forward without gradients at "
        "most steps: an agent acting, or a moving copy of it: an EMA teacher) "
        "and a recognised one without such a sign (a TD loss read as an MSE rises with "
        "the Q-values) get the facts as information: their level says nothing alone; one "
        "optimizer only"
    ),
)
def no_progress(run: WatchRun, t: Thresholds) -> list[Finding]:
    """With progress-min-steps steps or more, the median loss over the last steps is less than
    progress-min-fall below where it started (the higher of the first 5 and the first window's
    medians). A warning only for a single recognised objective (one loss kind: a cross-entropy,
    an MSE) and with a sign from the run itself that the model did not learn, named in the
    evidence: the loss at the uniform guess, no gradient reaching what step() updates, update
    ratios below 1e-5, gradients that died. A custom or multi-term objective (an RL loss: a
    policy term of either sign, an entropy bonus, a value MSE whose targets grow as the agent
    improves) and a recognised one without such a sign (a TD loss read as an MSE rises with
    the Q-values) get the facts as information. Information too when a recognised objective
    fell less than progress-stall-fall and stayed flat over the second half. One optimizer
    only."""
    # Judged only with one optimizer: the losses of several (a GAN's D and G) are adversarial,
    # and one that does not fall is their normal state.
    if several(run):
        return []
    out = []
    for s in by_optimizer(run):
        steps = [r for r in s.live() if finite(r.loss)]
        losses = [r.loss for r in steps if r.loss is not None]
        if len(losses) < max(t.progress_min_steps, 10) or early_blowup_of(s, t) is not None:
            continue
        w = window(len(losses))
        # where it started: the higher of the first 5 and the first window's medians, so a
        # loss that falls within the first window is not taken to start low
        first = max(statistics.median(losses[:5]), statistics.median(losses[:w]))
        last = statistics.median(losses[-w:])
        if first == 0:
            continue
        change = (last - first) / abs(first)
        if -change >= t.progress_min_fall:
            if trend_doubt(run, s) is None:
                out.extend(_stall_finding(run, s, steps, losses, first, last, t))
            continue
        out.append(_no_progress(run, s, steps, first, last, t))
    return out


def _no_progress(
    run: WatchRun, s: Series, steps: list[StepRecord], first: float, last: float, t: Thresholds
) -> Finding:
    """The warning where the loss's kind says what better means and the run's own numbers
    say it did not learn (named in the evidence); else the facts, as information."""
    w = window(len(steps))
    change = (last - first) / abs(first)
    clip = clip_note(steps)
    evidence = _no_progress_evidence(steps, first, last, w) + (
        [f"the script clips at max_norm {clip}"] if clip and clip != "scaled" else []
    )
    doubt = trend_doubt(run, s)
    signs = _did_not_learn(run, s, last, t)
    judged = doubt is None and bool(signs)
    finding = RULES["GS415"].finding(
        s.subject("loss"),
        s.say(
            f"the loss ended no better than where it started: median {num(last)} over "
            f"the last {w} steps against {num(first)} over its first steps"
            + (at_chance(run, s, last) if judged else "")
        ),
        _no_progress_advice(clip) if judged else _unjudged_advice(doubt),
        value=change,
        threshold=-t.progress_min_fall,
        evidence=tuple(evidence + [f"what says it did not learn: {x}" for x in signs]),
    )
    return finding if judged else replace(finding, severity=Severity.INFO)


def _unjudged_advice(doubt: str | None) -> str:
    """Why a loss that did not fall is not called a failure here."""
    why = doubt or (
        "nothing else in the run says it did not learn (update/weight ratios, gradients "
        "and the level of the loss look like learning)"
    )
    return (
        f"not judged: {why}; a loss not meant to fall (an RL objective, whose value "
        "targets grow as the agent improves) is fine: judge the run by what it is for "
        "(returns, accuracy on held-out data)"
    )


TINY_UPDATE = 1e-5
"""A median update/weight ratio below this (a hundredth of a healthy 1e-3) moves the
weights too little for the loss to move."""


def _did_not_learn(run: WatchRun, s: Series, last: float, t: Thresholds) -> list[str]:
    """The run's own signs that the model did not learn: the loss at the uniform guess,
    no gradient ever reaching what step() updates, updates too small to move the weights,
    gradients that died."""
    out = []
    chance = at_chance(run, s, last)
    if chance:
        out.append("the loss" + chance.removeprefix("; it"))
    trained = [
        i
        for i in s.members
        if i < len(run.params) and run.params[i].in_optimizer and run.params[i].requires_grad
    ]
    if trained and not any(run.tensors.got_grad(i) for i in trained):
        out.append(
            f"none of the {len(trained)} parameters the optimizer steps got a gradient: "
            "step() updates tensors the loss is not computed from"
        )
    else:
        ratios = [
            v
            for r in s.live()
            if r.update_ratios is not None
            for i in trained
            if i < len(r.update_ratios) and not math.isnan(v := r.update_ratios[i])
        ]
        if ratios and statistics.median(ratios) < TINY_UPDATE:
            out.append(
                f"the median update/weight ratio is {statistics.median(ratios):.3g} over "
                f"{len(ratios)} sampled values (about 1e-3 is healthy): the weights barely move"
            )
    out.extend(f.message for f in vanishing(run, s, t)[:1])
    return out


def _no_progress_evidence(steps: list[StepRecord], first: float, last: float, w: int) -> list[str]:
    """The loss at the start and the end, and the learning rate and norm at both ends. A
    loss that reached 0 or below (a policy-gradient objective, a loss 0 at its first step
    by construction) is given its change, not a percentage of a start near 0."""
    signed = any(r.loss is not None and r.loss <= 0 for r in steps)
    change = (
        ("+" if last >= first else "") + f"{num(last - first)} from the start"
        if signed
        else f"{(last - first) / abs(first):+.1%}"
    )
    return [
        f"median loss {num(first)} at the start (steps {steps[0].step}-{steps[4].step} "
        f"or {steps[0].step}-{steps[w - 1].step}, the higher), {num(last)} at steps "
        f"{steps[-w].step}-{steps[-1].step} ({change})",
        f"learning rate {lr_text(steps[0])} at step {steps[0].step}, {lr_text(steps[-1])} at "
        f"step {steps[-1].step}",
        f"gradient norm {num(steps[0].grad_norm)} at step {steps[0].step}, "
        f"{num(steps[-1].grad_norm)} at step {steps[-1].step}",
    ]


def _no_progress_advice(clip: str) -> str:
    """What to check, knowing whether (and how) the script clips (`clip_note`)."""
    advice = (
        "clipping before unscale_ cuts every update to almost nothing (see clip-before-unscale); "
        if clip == "scaled"
        else ""
    ) + (
        "the model did not learn: a learning rate too high sits at chance level (lower "
        "it or lengthen warm-up), one too small never moves the loss (update/weight "
        "ratios far below 1e-3 say so); check that step() updates the model the loss "
        "is computed on and that the targets match the inputs (a loss not meant to "
        "fall, as an RL objective or a converged checkpoint's, is fine: ignore it)"
    )
    if clip and clip != "scaled":
        advice += "; clipping is already on, so it is not what is missing"
    return advice


def _stall_finding(
    run: WatchRun,
    s: Series,
    steps: list[StepRecord],
    losses: list[float],
    first: float,
    last: float,
    t: Thresholds,
) -> list[Finding]:
    """Info: the loss fell a little, then stopped for the second half of the run (a high
    learning rate held back by clipping stalls this way near its start). Only info: a
    fine-tuning run or a hard task also falls little and flattens."""
    fall = (first - last) / abs(first)
    w = window(len(losses))
    mid = len(losses) // 2
    middle = middle_median(losses, w)
    if fall >= t.progress_stall_fall or (middle - last) / abs(first) >= t.progress_min_fall:
        return []
    # "has not improved" only where the noise lets two window medians show a fall of
    # progress-min-fall (standard error of a median: 1.25 sigma / sqrt(w))
    logged = all(v > 0 for v in losses)
    sigma = (
        robust_sigma([math.log(v) for v in losses]) if logged else robust_sigma(losses) / abs(first)
    )
    if 1.25 * sigma * math.sqrt(2 / w) > t.progress_min_fall / 2:
        return []
    finding = RULES["GS415"].finding(
        s.subject("loss"),
        s.say(
            f"the loss fell only {fall:.0%} (median {num(first)} over its first steps, "
            f"{num(last)} over the last {w}) and has not improved since about step "
            f"{steps[mid].step} ({num(middle)} there)" + at_chance(run, s, last)
        ),
        stall_advice.advice(steps, bool(_did_not_learn(run, s, last, t))),
        value=-fall,
        threshold=-t.progress_stall_fall,
    )
    return [replace(finding, severity=Severity.INFO)]


# -- GS417 -----------------------------------------------------------------------------
@rule(
    "GS417",
    "stopped-learning",
    Severity.WARNING,
    "none-grad",
    Stage.WATCH,
    "watch: a parameter that had gradients got none (None or zero) from some step to the end",
    example="a layer frozen with requires_grad_(False) midway, or a branch the loss stopped using",
    fix="find what changed at that step: a freeze, a detach() or no_grad() around it, a branch; "
    "if the freeze is meant, take it out of the optimizer",
    thresholds=(
        Threshold(
            "stop-min-steps",
            20,
            "a parameter with gradients, then none for at least this many of its optimizer's last"
            " steps (and 4× its longest gap while learning), stopped learning",
        ),
    ),
    supersedes=("GS410",),  # frozen midway: its low update ratio is the consequence
    objectives="any: whether a parameter still gets gradients, not the loss's value",
)
def stopped_learning(run: WatchRun, t: Thresholds) -> list[Finding]:
    """A parameter that had gradients got none (None, or only zeros) from some step to the end:
    at least stop-min-steps steps and four times its longest gap while it was learning.
    Information where it is a bias that got exact zeros while its layer's weight went on
    learning (rules/shift_invariance.py). A routed expert of a mixture (alike siblings with
    a router beside them: rules/routed.py) that stopped while its siblings went on is a dead
    expert, the router no longer choosing it, and its advice is the load-balancing loss.
    Information where every tensor of the optimizer got only zeros from one step on while
    its loss was exactly 0 (rules/no_signal.py: GRPO's groups of one reward each), unless
    that loss is a logistic one, 0 only when saturated (DPO's beta far too large); and for
    a learnable fake quantizer's zero point, whose gradient needs inputs clipped; and for
    zeros below a floor on a loss term (free bits: rules/floor_stop.py)."""
    # Frozen midway (None, or zeros under set_to_none=False) or cut from the loss, judged on
    # its own optimizer's steps (a GAN's G gets nothing in D's). Never-learned is GS413's; a
    # dead layer's exact 0 is GS405's. Read from `run.tensors`, so every step counts.
    out = []
    places = routed.routed(run)
    for s in by_optimizer(run):
        live_steps = run.tensors.live_steps(s.index)
        zeros = no_signal.zeros_since(run, s)
        dead = {f.subject for f in vanishing(run, s, t)}
        for i in s.members:
            if i >= len(run.params) or not run.params[i].in_optimizer:
                continue
            p = run.params[i]
            had = run.tensors.learned(s.index, i)
            if had is None or p.replaced_after is not None:  # its model's new one learns
                continue
            tail = live_steps - had.last - 1
            if tail < max(t.stop_min_steps, 1) or tail < 4 * had.longest_gap:
                continue
            none = had.zero_after == 0
            if not none and p.requires_grad and module_of(p.name) in dead:
                continue
            finding = _stopped(run, s, p, had, tail, t)
            finding = routed.if_dead_expert(run, s.index, i, had, finding, places)
            finding = no_signal.read_zeros(finding, zeros)
            finding = zero_point.stopped(finding, p, had.since_step)
            finding = floor_stop.stopped(finding, p, had)
            weight = shift_invariance.cancelled(run, i, s.index)
            if weight is not None:
                head = (
                    f"{p.name} got only zero gradients from step {had.since_step} to the end "
                    f"(at step {had.last_step}: {num(had.last_value)})"
                )
                finding = shift_invariance.as_information(finding, s.say(head), weight)
            out.append(about(finding, [had.since_step]))
    return out


def _stopped(
    run: WatchRun, s: Series, p: ParamInfo, had: Learned, tail: int, t: Thresholds
) -> Finding:
    """GS417's finding on one parameter: since when, what it got since, where to look."""
    since = had.since_step
    what = (
        "no gradient (None)"
        if had.zero_after == 0
        else "only zero gradients"
        if had.none_after == 0
        else "no gradient (None, or zeros)"
    )
    if not p.requires_grad:
        advice = (
            f"it is frozen now (requires_grad=False): if that was not meant, find the "
            f"requires_grad_(False) or freeze call the script makes around step {since}; "
            "if it was, take it out of the optimizer (or ignore this finding)"
        )
    elif all_stopped.all_stopped_at(run, s) == since:
        advice = all_stopped.advice(since)
    else:
        advice = (
            f"find what changed at step {since}: a detach() or no_grad() around it, or "
            f"a branch the loss stopped using (`{inspect_command(run, since)}` shows "
            "where the graph is cut)"
        )
    return RULES["GS417"].finding(
        p.name,
        s.say(
            f"{p.name} stopped learning at step {since}: it had gradients until "
            f"step {had.last_step}, then {what} in all {tail} steps to the end"
        ),
        advice,
        value=float(since),
        threshold=t.stop_min_steps,
        evidence=(
            f"{had.had} of the first {had.last + 1} steps had a gradient; the "
            f"longest gap while learning was {had.longest_gap} steps",
            f"gradient norm at step {had.last_step}: {num(had.last_value)}",
        ),
    )
