"""Output logits whose log-partition drifts away steadily (GS454), a precursor. No torch.

A softmax ignores a shift of all its logits, so the cross-entropy's gradient never holds
their level: log Z = logsumexp(logits) is free to wander, and at a high learning rate
without weight decay it drifts for hundreds of steps until the logits' own precision
(bf16 keeps 8 bits) breaks the loss (Wortsman et al. 2023; PaLM adds a z-loss,
1e-4·log²Z, to hold it near 0). Adam drives it down where most classes are absent from
most batches: their gradient is small but of one sign, and Adam makes each a step of a
share of the lr (weight decay holds it; a z-loss does not). A model that only grows
confident moves log Z as its loss falls; the drift is judged against that fall, and it must
be of the level: log Z is the mean logit plus the logsumexp of the centred logits, and a
margin that keeps growing on separable data (hard-example mining feeds it) moves only the
second, which the softmax does not ignore and a z-loss is not for.
watcher/logit_probe.py samples log Z at the cross-entropy every 16th step.
"""

from __future__ import annotations

import math
import statistics

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, When, rule
from gradscope.rules.step_common import about, finite
from gradscope.rules.step_growth import SPAN, first_trend
from gradscope.rules.symptoms import DIVERGENCE
from gradscope.steps.logit_facts import OutputLogits
from gradscope.steps.records import WatchRun

DISTANCE = 10.0
"""Nats between the mean log Z and ln C (where logits of one level sit: a uniform guess)."""
RISE = 2.0
"""Nats the distance grew over the last SPAN steps: still drifting."""
AGAINST_LOSS = 4.0
"""The distance grew at least this many times as much as the loss fell over those steps."""
LEVEL_SHARE = 0.5
"""The mean logit moved with log Z by at least this share of its distance's change since
the first sample: the drift is of the level, not of the logits' spread."""


ADVICE_UP = (
    "add a z-loss, 1e-4 * torch.logsumexp(logits, -1).pow(2).mean(), to the loss (PaLM); "
    "or weight decay on the output head, or a lower learning rate"
)
ADVICE_DOWN = (
    "weight decay on the output head (its bias too), or a lower learning rate: Adam moves "
    "the logits of classes absent from most batches down by a share of the lr every step "
    "(their gradient is small but of one sign); a z-loss of 1e-4 scales that gradient by "
    "1 + 2e-4·log Z, which Adam's normalisation ignores, so it holds log Z only where the "
    "classes are in most batches (PaLM's)"
)
"""A downward drift's fix: on CPU runs of a 512-class chain with a few tokens a step, the
z-loss left the drift as it was and weight decay 0.1 held log Z (docs/watch.md)."""


@rule(
    "GS454",
    "logit-drift",
    Severity.WARNING,
    "precursor",
    Stage.WATCH,
    "watch (precursor): the output logits' log-partition (logsumexp at the cross-entropy) "
    "drifted 10 nats or more from ln C, 2 nats or more in 256 steps and 4× what the loss "
    "fell meanwhile: nothing holds their level and the loss diverges next",
    example="an MLP language model over 512 classes, 32 tokens a step, AdamW at 3e-2 "
    "without weight decay (the corpus's drift_lm.py): each class absent from most steps, "
    "Adam moves every row of the head down; mean log Z 5.2 at step 16, -5.2 at 1,200 "
    "(named there) while the loss falls from 6.3 to 4.4; the loss rises for good from "
    "about step 11,500, log Z at -22",
    fix="a drift up: a z-loss of 1e-4·logsumexp(logits)² added to the loss (PaLM); a drift "
    "down: weight decay on the output head (a z-loss does not hold the drift of classes "
    "absent from most batches); or a lower learning rate",
    objectives="a cross-entropy: the logits it is given, whose log-partition a calibrated "
    "model keeps near ln C; judged against the loss's own fall, so a loss that explains the "
    "drift stays silent",
    explains=DIVERGENCE,
    explains_when=When.BEFORE,
)
def logit_drift(run: WatchRun, t: Thresholds) -> list[Finding]:
    """At every 16th step, the logits given to cross_entropy: the mean over the step's
    first 256 rows of log Z = logsumexp over the classes. A uniform guess, and any logits
    of one level, sit at ln C; the cross-entropy's gradient sums to zero over the classes
    and never pulls the level back. It warns at the first sample at which the mean log Z
    is 10 nats or more from ln C, 2 nats or more further than 256 steps before, rose at
    60% of the samples in between, and grew at least 4× as much as the loss (the median
    of the 16 steps before each end) fell over those steps: a drift that buys no fit.
    One optimizer only (a GAN's losses move by design)."""
    o = run.state_facts.output_logits
    if o is None or len(run.optimizers) > 1 or o.classes < 2:
        return []
    ln_c = math.log(o.classes)
    distance = [abs(m - ln_c) if finite(m) else 0.0 for m in o.mean]
    losses = {r.step: r.loss for r in run.steps if finite(r.loss)}

    def grown(back: int, i: int) -> bool:
        rise = distance[i] - distance[back]
        if distance[i] < DISTANCE or rise < RISE:
            return False
        fall = _loss_near(losses, o.steps[back]) - _loss_near(losses, o.steps[i])
        if math.isnan(fall) or rise < AGAINST_LOSS * max(fall, 0.0):
            return False
        return _of_the_level(o, i, distance[i] - distance[0], o.mean[i] > ln_c)

    at = first_trend(o.steps, distance, grown)
    return [] if at is None else [_finding(run, o, at, ln_c, losses)]


def _of_the_level(o: OutputLogits, i: int, moved: float, up: bool) -> bool:
    """Whether the mean logit moved with log Z (its way) by LEVEL_SHARE of `moved`, the
    distance's change since the first sample; true where the level was not measured."""
    if len(o.level) != len(o.mean) or not finite(o.level[i]) or not finite(o.level[0]):
        return True
    shift = o.level[i] - o.level[0]
    return (shift if up else -shift) >= LEVEL_SHARE * moved


def _loss_near(losses: dict[int, float | None], step: int) -> float:
    """The median loss of the 16 steps up to `step`; NaN without one."""
    near = [v for s in range(step - 15, step + 1) if (v := losses.get(s)) is not None]
    return statistics.median(near) if near else math.nan


def _finding(
    run: WatchRun, o: OutputLogits, at: int, ln_c: float, losses: dict[int, float | None]
) -> Finding:
    step, start = o.steps[at], o.steps[0]
    way = "up" if o.mean[at] > ln_c else "down"
    picks = sorted({0, len(o.steps) // 2, at, len(o.steps) - 1})
    finding = RULES["GS454"].finding(
        "output logits",
        f"the output logits' log-partition drifted {way}: mean log Z {num(o.mean[0])} at step "
        f"{start}, {num(o.mean[at])} at step {step} (ln C = {num(ln_c)} for {o.classes} "
        f"classes; max {num(max(o.max))}), while the loss went from "
        f"{num(_loss_near(losses, start))} to {num(_loss_near(losses, step))}: nothing holds "
        "the logits' level, and the loss diverges next (precursor)",
        ADVICE_DOWN if way == "down" else ADVICE_UP,
        value=abs(o.mean[at] - ln_c),
        threshold=DISTANCE,
        evidence=(
            "mean log Z by step: " + ", ".join(f"{o.steps[i]}: {num(o.mean[i])}" for i in picks),
            f"first certain at step {step} ({DISTANCE:g} nats or more from ln C, {RISE:g} "
            f"more than {SPAN} steps before, {AGAINST_LOSS:g}× the loss's fall)",
        ),
    )
    return about(finding, [step])
