"""GS443: every step trains on the same batch, from the loss's targets compared between
consecutive steps (watcher/same_batch.py): said from the second repeat on (step 3), with
the loss's fall as its evidence, not waited for. Information: full-batch training and an
overfit check do it by design. No torch."""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import about, step_list
from gradscope.steps.records import WatchRun
from gradscope.steps.state_facts import BatchRepeats

FALL = 10.0
"""The loss fell to ~0: an order of magnitude below its first step's, the batch
memorised (evidence, when it happened within the run)."""
REPEATS = 2
"""Consecutive pairs found the same before it is said: two (steps 1-2 and 2-3) make a
chance repeat of a batch's targets implausible."""
MIN_TARGETS = 4
"""Fewer targets in a batch repeat by chance too often to name one batch by them."""


@rule(
    "GS443",
    "same-batch",
    Severity.INFO,
    "same-batch",
    Stage.WATCH,
    "watch: the loss's targets were identical at every pair of consecutive steps "
    "compared (two at least): each step trains on the same batch",
    example="x, y = next(iter(loader)) inside the training loop (a fresh iterator, "
    "and so the first batch, every time)",
    fix="iterate the loader (for x, y in loader); full-batch training on a dataset "
    "of one batch, or overfitting one batch as a check, is by design: ignore it there",
    objectives=(
        "a torch loss that keeps its target (cross-entropy, MSE, ...): its targets compared "
        "by value at consecutive steps; a contrastive loss's positions 0..n-1 are no repeat, "
        "a custom loss without a target is not compared; one optimizer only (a GAN's losses "
        "alternate)"
    ),
)
def same_batch(run: WatchRun, t: Thresholds) -> list[Finding]:
    """torch's loss nodes keep their target. At the first backward of steps 1-3, and of
    steps 25k and 25k+1, the target is compared with the previous step's on the device (by
    value: a reused buffer refilled with new data is a new batch). When at least two
    consecutive pairs were compared and every one found the same targets (at least 4 of
    them, not all one value, nor the positions 0..n-1 that a contrastive loss uses in every
    batch; the loss's other terms' targets the same too: a TTS model's stop-token labels
    repeat with the lengths while its mel frames change), the run trains on one batch: the
    loss will fall towards 0 and say nothing of the data. Said at step 3, the second repeat;
    the loss's fall, where the run got there, is its evidence. Information, not a warning: a
    dataset of one batch trained full-batch does the same by design, and so does overfitting
    one batch as a check; the finding says how to tell. A dataset of a few batches cycled
    differs from step to step, and stays silent. One optimizer only (a GAN's losses
    alternate). Silent on an optimizer that trains only inputs beside a fixed network (style
    transfer's image, a soft prompt): its targets (a style's Gram matrices, a class to
    reach) are fixed by design, and there is no data to memorise. Silent under a
    quasi-Newton optimizer (LBFGS), whose line search needs the same objective at every
    evaluation."""
    if len(run.optimizers) != 1:
        return []
    out = []
    for r in run.state_facts.repeats:
        if len(r.compared) < REPEATS or r.same != r.compared or r.samples < MIN_TARGETS:
            continue
        if run.optimises_inputs(r.optimizer) or _quasi_newton(run, r.optimizer):
            continue
        out.append(_finding(run, r))
    return out


def _quasi_newton(run: WatchRun, index: int) -> bool:
    """LBFGS's line search and curvature pairs assume one fixed objective: the whole
    dataset every step is the method, not a loader that yields one batch."""
    settings = run.settings_of(index)
    return settings is not None and settings.sizes_own_step


def _finding(run: WatchRun, r: BatchRepeats) -> Finding:
    losses = [
        (s.step, s.loss)
        for s in run.steps
        if s.optimizer == r.optimizer and s.loss is not None and math.isfinite(s.loss)
    ]
    low = None
    if losses and losses[0][1] > 0:
        low = next(((n, v) for n, v in losses if v <= losses[0][1] / FALL), None)
    pairs = ", ".join(f"{s - 1}-{s}" for s in r.compared[:6])
    pairs += f" … (+{len(r.compared) - 6})" if len(r.compared) > 6 else ""
    if low is not None:
        fall = f"; the loss fell from {num(losses[0][1])} to {num(low[1])} by step {low[0]}"
    elif len(losses) > 1:
        fall = f"; the loss went from {num(losses[0][1])} to {num(losses[-1][1])}"
    else:
        fall = ""
    message = (
        f"the loss's {r.samples} targets were the same at every pair of consecutive steps "
        f"compared ({pairs}){fall}: each step trains on one batch, "
        + ("and memorises it" if low is not None else "which the model will memorise")
    )
    advice = (
        f"if the data holds more than these {r.samples} targets, the loader yields one "
        "batch: a next(iter(loader)) inside the loop starts a fresh iterator, at the "
        "first batch, every step; loop over it (for x, y in loader) instead; if this is an "
        "overfit test, ignore it (full-batch training on data of this size is by design "
        "too)"
    )
    evidence = [f"targets read from {r.loss} at steps {step_list(list(r.compared))}"]
    if low is not None:
        evidence.append(
            f"loss {num(losses[0][1])} at step {losses[0][0]}, {num(low[1])} at step {low[0]}"
        )
    finding = RULES["GS443"].finding(
        run.optimizer_label(r.optimizer),
        message,
        advice,
        value=float(len(r.same)),
        threshold=float(REPEATS),
        evidence=tuple(evidence),
    )
    marks = [r.compared[0] - 1, *r.compared[:2]] + ([low[0]] if low else [])
    return about(finding, marks)
