"""GS418: a loss that is being maximised, told from the loss's kind and bounds (`run.loss_kinds`):
a cross-entropy below zero, or one that climbs away from the uniform guess, is not being
minimised. No torch."""

from __future__ import annotations

import statistics
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import (
    Series,
    about,
    by_optimizer,
    loss_steps,
    several,
    window,
)
from gradscope.rules.symptoms import GROWTH
from gradscope.steps.meaning import LossKind, LossTerm
from gradscope.steps.records import StepRecord, WatchRun


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
    objectives=(
        "a loss bounded below (cross-entropy, NLL of log_softmax, binary cross-entropy, "
        "MSE, L1 or any absolute error, the pinball loss of quantile forecasts, Huber, the "
        "logistic loss -log sigmoid of negative sampling, a diagonal Gaussian's KL written "
        "out as a VAE's or CVAE's latent term), read from its "
        "autograd graph, negated or under maximize=True: "
        "the bound says which way is better, and the values must go past it; a custom "
        "objective has no bound and is not judged; one optimizer, or several stepping one "
        "loss (a GAN's generator ascends by design)"
    ),
    explains=GROWTH,
)
def loss_maximised(run: WatchRun, t: Thresholds) -> list[Finding]:
    """The loss's own autograd graph shows a loss bounded below (cross-entropy, NLL of log_softmax,
    (binary) cross-entropy, MSE, an absolute error, a pinball loss, Huber) entering the value
    backward ran on negated, or the optimizer has maximize=True on a plain one; and the values
    confirm it: the loss went below the bound (the negated term outweighs the rest) and, in a
    run long enough to tell, kept falling (with maximize, rising). A cross-entropy can never be
    below 0, so the run is ascending it. Judged with one optimizer, or several that step one
    loss (the same values step after step, none with maximize=True): a GAN's minimax generator
    ascends by design. An optimizer that trains only inputs beside a fixed network (a universal
    perturbation, an adversarial patch) ascends that network's loss as an untargeted attack
    does, by design: information that says so (a targeted one minimises its target's)."""
    # A loss bounded below (a cross-entropy, an MSE, ...) that the optimizer drives up: the
    # graph shows it negated (or the optimizer has maximize=True on a plain one), and the values
    # confirm it. Several optimizers (a GAN's minimax G) may ascend by design.
    series = list(by_optimizer(run))
    if several(run):
        if not _one_objective(run, series):
            return []
        series = series[:1]  # one loss: said once
    out = []
    for s in series:
        kind = run.loss_kind(s.index)
        if kind is None:
            continue
        maximize = run.maximizes(s.index)
        bad = (
            [x for x in kind.terms if x.bound is not None and not x.negated]
            if maximize
            else kind.negated_terms()
        )
        steps, losses = loss_steps(s)
        if not bad or not losses or min(losses) >= 0:
            continue  # below 0 only when the negated term outweighs the rest
        w = window(len(losses))
        first, last = statistics.median(losses[:w]), statistics.median(losses[-w:])
        if len(losses) >= 2 * w and last >= first:
            continue  # long enough to see it, and the ascent does not go on
        finding = _maximised(s, kind, bad[0], maximize, steps, (first, last, w))
        if run.optimises_inputs(s.index):
            finding = _attack(finding, bad[0])
        out.append(about(finding, [r.step for r in steps[:1]]))
    return out


def _one_objective(run: WatchRun, series: list[Series]) -> bool:
    """Several optimizers that step one loss together (a knowledge-graph model's complex
    tables under Adagrad, its real bias under AdamW): the same loss values, step after step,
    for every one, none with maximize=True. A GAN's players, or an adversary that ascends the
    loss its opponent descends, have losses or directions of their own."""
    if any(run.maximizes(s.index) for s in series):
        return False
    losses = {tuple(loss_steps(s)[1]) for s in series}
    return len(losses) == 1 and bool(next(iter(losses)))


_NAMES = {"l1": "absolute error (L1)", "pinball": "pinball (quantile) loss"}
"""Kinds whose name alone reads badly in a sentence."""


def _maximised(
    s: Series,
    kind: LossKind,
    term: LossTerm,
    maximize: bool,
    steps: list[StepRecord],
    medians: tuple[float, float, int],
) -> Finding:
    """GS418's finding: which bounded term the run ascends, and how its values show it;
    medians: the first and last windows' median losses and the window."""
    first, last, w = medians
    sign = -1 if maximize else 1  # the script's own loss values, as it printed them
    name = _NAMES.get(term.kind, term.kind.replace("_", "-"))
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
            f"{num(sign * (steps[-1].loss or 0))} at step {steps[-1].step} (the {name} is "
            f"never below {num(term.bound)})"
        ),
        "drop maximize=True from the optimizer" if maximize else _unnegate(term, name),
        value=sign * last,
        threshold=term.bound,
        evidence=(
            f"loss graph: {kind.describe()}",
            f"median loss {num(sign * first)} over the first {w} steps, {num(sign * last)} "
            "over the last",
        ),
    )
    return finding


def _unnegate(term: LossTerm, name: str) -> str:
    """How to minimise the term again: a log sigmoid is the logistic loss negated as written."""
    if term.kind == "logistic_loss":
        return (
            "minimise the logistic loss -log sigmoid(x) = softplus(-x): write -F.logsigmoid(score) "
            "for the pairs to score high and -F.logsigmoid(-score) for the negatives (a "
            "log sigmoid added to the loss, or a softplus subtracted, is ascended)"
        )
    return (
        f"minimise the {name} itself: remove the minus sign (or the negative factor) in front "
        "of it; for a deliberate ascent, keep the loss positive and pass maximize=True to the "
        "optimizer"
    )


def _attack(finding: Finding, term: LossTerm) -> Finding:
    """The ascent of a fixed network's loss by the inputs it is fed: an untargeted attack."""
    name = term.kind.replace("_", "-")
    return replace(
        finding,
        severity=Severity.INFO,
        message=finding.message + "; the optimizer trains only inputs of a network the "
        f"script keeps fixed, so raising its {name} is what an untargeted attack (a "
        "universal perturbation, an adversarial patch) does",
        advice=f"nothing to fix for an untargeted attack; a targeted one minimises the {name} "
        "towards its target class: remove the minus sign there",
    )


# -- GS419 ------------------------------------------------------------------------------
