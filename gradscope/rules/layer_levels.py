"""A layer's gradient that jumped and stayed at its new level (GS450's judgement). No torch.

A spike is one batch's: the layer's norm comes back down. A gradient that rises 20× at one
step and keeps that level is switched on: a bias before a BatchNorm that normalises with
batch statistics gets rounding noise only (the batch mean takes any shift away), until the
BatchNorm is switched to its running statistics (QAT's `freeze_bn_stats`, a fine-tune's
frozen BatchNorms), and from then on its full gradient; a loss term turned on, or a layer's
input unblocked, does the same. Such a jump is told as information, not as a spike.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.fmt import num
from gradscope.steps.layer_spikes import FOLLOW, LayerSpike

STAYED = 20.0
"""The tensor's median over the FOLLOW steps after the jump at least this many times its
median before it: every step after is as far above the old level as the jump was judged
to be (GS450's LAYER_RATIO)."""


def stayed(x: LayerSpike) -> bool:
    """The jump's tensor kept its new level over the steps after it (False where the run
    ended before FOLLOW steps had passed)."""
    return math.isfinite(x.after) and x.after >= STAYED * x.median


def spikes_first(found: list[LayerSpike]) -> list[LayerSpike]:
    """The jumps that came back down, where any did; else every jump (each one stayed)."""
    back = [x for x in found if not stayed(x)]
    return back or found


def level_change(found: list[LayerSpike], finding: Finding, layer: str) -> Finding:
    """Information where every jump found stayed at its new level."""
    if not found or not all(stayed(x) for x in found):
        return finding
    worst = min(found, key=lambda x: x.step)  # the switch: the first step at the new level
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"the gradient of `{layer}` rose to {worst.ratio:.0f}× its median at step "
        f"{worst.step} ({num(worst.value)} against {num(worst.median)}) and stayed there "
        f"(median {num(worst.after)} over the {FOLLOW} steps after): it moved to a new "
        "level, not one batch's spike; a bias before a BatchNorm switched from batch to "
        "running statistics (QAT's freeze_bn_stats, BatchNorms frozen for fine-tuning), a "
        "loss term switched on or a layer's input unblocked does this",
        advice=f"nothing to fix if something was switched at step {worst.step} (the "
        "BatchNorms frozen, a term or a layer turned on); if nothing was, look at what "
        f"changed for `{layer}` at that step",
    )
