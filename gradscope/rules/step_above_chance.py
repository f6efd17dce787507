"""GS478: a cross-entropy worse than a uniform guess at every step, from the first: the
untrained forward already gives large, confidently wrong logits and training never brings
them down to what predicting nothing costs. Read from the loss's kind (`run.loss_kinds`:
the uniform guess, ln C per target) and the recorded losses. No torch.

A fresh model whose layers keep their activations' scale starts near ln C; one whose
forward grows without bound starts far above it and stays there: a diagonal state-space
kernel or recurrence whose decay has the wrong sign (S4D's A = exp(log_A_real) without the
minus, an LRU's |lambda| above 1), an exp of an unbounded parameter, an init scaled far too
large. A badly scaled but stable init (a tied embedding at std 1) also starts high but
falls below the uniform guess within a few dozen steps; the rule waits for
progress-min-steps steps."""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity, Threshold
from gradscope.fmt import num
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.step_common import Series, about, by_optimizer, chance_level, finite
from gradscope.steps.records import WatchRun

ADVICE = (
    "run one batch through the untrained model and print each layer's output scale: the "
    "layer where it jumps is the one to fix. A diagonal SSM needs a decay with negative real "
    "part (S4D's A = -exp(log_A_real) + 1j * A_imag, an LRU's lambda = exp(-exp(nu_log) + "
    "1j * exp(theta_log)), Mamba's A = -exp(A_log) with dt through softplus); an exp or power "
    "of a free parameter needs it bounded; a layer initialised far too large (an embedding "
    "tied to the output head at std 1) needs the scale of its reference init (std 0.02)"
)


@rule(
    "GS478",
    "worse-than-chance",
    Severity.WARNING,
    "exploding",
    Stage.WATCH,
    "watch: a cross-entropy more than twice the loss of a uniform guess at every step, from "
    "the first (before any update) to the last: the model's own forward makes huge logits; "
    "information when only the first loss was ten times the guess and the run recovered",
    example="S4D's kernel with A = exp(log_A_real) + 1j * A_imag (the minus left out): the "
    "convolution kernel grows as exp(dt·t) along a 256-step sequence",
    fix="find the layer whose output scale blows up on one batch of the untrained model: a "
    "recurrence or kernel whose decay has the wrong sign, an unbounded exp, an init far too large",
    thresholds=(
        Threshold(
            "chance-factor",
            2.0,
            "a cross-entropy this many times a uniform guess's loss (ln C per target) at every "
            "step is worse than predicting nothing",
        ),
        Threshold(
            "first-loss-factor",
            10.0,
            "a first cross-entropy (before any update) this many times a uniform guess's loss "
            "comes from the forward, not from training: information when the run recovers",
        ),
    ),
    objectives=(
        "a minimised loss read as cross-entropies only: a uniform guess's loss (ln C per "
        "target) is what zero logits cost, so a loss above it says the forward, not the data, "
        "sets the logits; a regression or custom loss has no such level"
    ),
)
def worse_than_chance(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A warning when each finite loss of the optimizer's steps, the first included, is more
    than chance-factor times the loss of a uniform guess: zero logits would have done better
    at every step. A learning rate too high starts at the uniform guess (the first step's loss
    comes before any update) and rises from it; this run's untrained forward was already far
    above it and its updates never brought it down: the forward itself makes the logits huge.
    Information when only the first loss is more than first-loss-factor times the guess and
    the run came down later: the first updates went into shrinking what the forward blew up
    (a layer switched off rather than fixed). Silent for a warning under progress-min-steps
    finite steps, for a maximised loss, and for a loss not read as cross-entropies."""
    out = []
    for s in by_optimizer(run):
        level = chance_level(run, s)
        losses = [(r.step, r.loss or 0.0) for r in s.live() if finite(r.loss)]
        if level is None or s.sign < 0 or not losses:
            continue
        best = min(loss for _, loss in losses)
        steady = len(losses) >= max(t.progress_min_steps, 10) and best > t.chance_factor * level
        if not steady and losses[0][1] <= t.first_loss_factor * level:
            continue
        finding = _finding(run, s, level, losses, this, steady)
        if not steady:
            finding = replace(finding, severity=Severity.INFO)
        out.append(about(finding, [losses[0][0]]))
    return out


def _finding(
    run: WatchRun,
    s: Series,
    level: float,
    losses: list[tuple[int, float]],
    this: Rule,
    steady: bool,
) -> Finding:
    (step, first), best = losses[0], min(loss for _, loss in losses)
    kind = run.loss_kind(s.index)
    classes = kind.terms[0].classes if kind is not None and kind.terms else None
    guess = f"ln {classes} = {math.log(classes):.3g} per target" if classes else "ln C per target"
    if steady:
        told = (
            f"the cross-entropy was more than {num(best / level)}× a uniform guess's loss "
            f"({num(level)}, {guess}) at every one of {len(losses)} steps: {num(first)} at "
            f"step {step}, before any update, and never below {num(best)}; the untrained "
            "forward already made huge, confidently wrong logits and training did not bring "
            "them down to what zero logits cost"
        )
    else:
        told = (
            f"the first step's cross-entropy, before any update, was {num(first)}: "
            f"{num(first / level)}× a uniform guess's loss ({num(level)}, {guess}); the "
            f"untrained forward made huge, confidently wrong logits, and the first updates went "
            f"into shrinking them (best {num(best)} later), so the layer that blew up may have "
            "been switched off rather than fixed"
        )
    return this.finding(
        s.subject("loss"),
        s.say(
            told + ": something in the forward grows without bound (a recurrence or kernel "
            "whose decay has the wrong sign, an unbounded exp, an init far too large), not the "
            "learning rate"
        ),
        ADVICE,
        value=first / level,
        threshold=None,
        evidence=(
            f"loss read from its graph: {kind.describe() if kind is not None else 'unknown'}",
            f"first loss {num(first)}, best {num(best)}, last {num(losses[-1][1])}",
        ),
    )
