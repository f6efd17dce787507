"""GS443: every step trains on the same batch, from the loss's targets compared between
consecutive steps (watcher/same_batch.py), and the loss falling to ~0 on it. Information:
full-batch training does it by design. No torch."""

from __future__ import annotations

import math

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, rule
from gradscope.rules.step_common import about, step_list
from gradscope.steps.records import WatchRun

FALL = 10.0
"""The loss fell to ~0: an order of magnitude below its first step's, the batch
memorised. Without it identical targets alone are a smoke test or a toy run."""


@rule(
    "GS443",
    "same-batch",
    Severity.INFO,
    "same-batch",
    Stage.WATCH,
    "watch: the loss's targets were identical at every pair of consecutive steps "
    "compared and the loss fell to ~0: each step trains on the same batch",
    example="x, y = next(iter(loader)) inside the training loop (a fresh iterator, "
    "and so the first batch, every time)",
    fix="iterate the loader (for x, y in loader); full-batch training on a dataset "
    "of one batch is by design: ignore it there",
    objectives=(
        "a torch loss that keeps its target (cross-entropy, MSE, ...): its targets the "
        "same at every step compared, and the loss fallen to a tenth; a contrastive loss's "
        "positions 0..n-1 are no repeat, a custom loss without a target is not compared; "
        "one optimizer only (a GAN's losses alternate)"
    ),
)
def same_batch(run: WatchRun, t: Thresholds) -> list[Finding]:
    """torch's loss nodes keep their target. At the first backward of steps 1-3, and of
    steps 25k and 25k+1, the target is compared with the previous step's on the device.
    When every comparison found the same targets (not all one value, nor the positions
    0..n-1 that a contrastive loss uses in every batch) and the loss fell to a tenth of
    its first value, the run memorises one batch: a loss near 0 that says nothing of the
    data. Information, not a warning: a dataset of one batch trained full-batch does
    the same by design (and so does overfitting one batch as a check); the finding says
    how to tell. A dataset of a few batches cycled differs from step to step, and stays
    silent. One optimizer only (a GAN's losses alternate)."""
    if len(run.optimizers) != 1:
        return []
    out = []
    for r in run.state_facts.repeats:
        if not r.compared or r.same != r.compared:
            continue
        losses = [
            (s.step, s.loss)
            for s in run.steps
            if s.optimizer == r.optimizer and s.loss is not None and math.isfinite(s.loss)
        ]
        if len(losses) < 2 or losses[0][1] <= 0:
            continue
        low = next(((n, v) for n, v in losses if v <= losses[0][1] / FALL), None)
        if low is None:
            continue
        pairs = ", ".join(f"{s - 1}-{s}" for s in r.compared[:6])
        pairs += f" … (+{len(r.compared) - 6})" if len(r.compared) > 6 else ""
        message = (
            f"the loss's {r.samples} targets were the same at every pair of consecutive "
            f"steps compared ({pairs}), and the loss fell from {num(losses[0][1])} to "
            f"{num(low[1])} by step {low[0]}: each step trains on one batch, and memorises it"
        )
        advice = (
            f"if the data holds more than these {r.samples} targets, the loader yields one "
            "batch: a next(iter(loader)) inside the loop starts a fresh iterator, at the "
            "first batch, every step; loop over it (for x, y in loader) instead. Full-batch "
            "training on data of this size is by design: nothing to fix"
        )
        evidence = (
            f"targets read from {r.loss} at steps {step_list(list(r.compared))}",
            f"loss {num(losses[0][1])} at step {losses[0][0]}, {num(low[1])} at step {low[0]}",
        )
        finding = RULES["GS443"].finding(
            run.optimizer_label(r.optimizer),
            message,
            advice,
            value=low[1],
            threshold=losses[0][1] / FALL,
            evidence=evidence,
        )
        out.append(about(finding, [r.compared[0] - 1, *r.compared[:2], low[0]]))
    return out
