"""All-zero gradients of parameters the loss reaches only through a product with a frozen
parameter that is all zeros (stats.frozen_gated): a ReZero alpha or a tanh gate left with
requires_grad=False. No optimizer step moves the gate, so the branch behind it never learns:
a warning that names the gate, not a dead ReLU nor a loss weight off for a warm-up."""

from __future__ import annotations

from gradscope.findings import Finding, Rule
from gradscope.stats import RunStats


def finding(this: Rule, stats: RunStats, name: str, numel: int) -> Finding:
    gates = ", ".join(stats.frozen_gates[:4]) + (" ..." if len(stats.frozen_gates) > 4 else "")
    return this.finding(
        name,
        f"grad of {name} is all zeros ({numel} elements): the loss reaches it only through a "
        f"product with {gates}, all zeros and frozen (requires_grad=False): no step will ever "
        "move it, so what it multiplies never learns",
        "make the gate trainable (requires_grad_(True)) and give it to the optimizer: a zero "
        "gate or residual scale must move at the first step to open its branch",
        0.0,
    )
