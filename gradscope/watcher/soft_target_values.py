"""Probability targets of a cross-entropy that are no probabilities, read from the graph.

`F.cross_entropy(logits, target)` with a float target of the logits' shape reads the
target as class probabilities and computes -Σ target · log_softmax(logits). Handed a
teacher's raw logits (or any target with a negative entry) in place of its softmax, the
term -target_i · log p_i of a negative target_i falls without bound as p_i goes to 0: the
loss has no minimum, the logits grow until the run turns NaN, and a learning rate looks
to blame. One read of the saved target tensor (a device sync, once per graph read); a
mixup, cut-mix or smoothed target is never negative.
"""

from __future__ import annotations

from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, Order, inputs, saved
from gradscope.fmt import num
from gradscope.watcher.loss_inputs import Misfed, soft_target

SEARCH = 64
"""Nodes searched from the loss: the product sits a few ops below it."""

NEGATIVE = -1e-6
"""Below this a target entry is negative, not a probability rounded below 0."""


def find(loss_node: Any) -> Misfed | None:
    """The first soft-target cross-entropy near the top of the loss's graph whose targets
    hold a negative entry."""
    if loss_node is None:
        return None
    for node in NodeWalk([loss_node], inputs, order=Order.NEAREST, limit=SEARCH):
        found = read(node)
        if found is not None:
            return found
    return None


def read(node: Any) -> Misfed | None:
    """`node`, the product of targets and a log_softmax (loss_inputs.soft_target), with a
    negative target: the targets are no probabilities."""
    if soft_target(node) is None:
        return None
    target = saved(node, "_saved_self", None)
    if not isinstance(target, torch.Tensor):
        target = saved(node, "_saved_other", None)
    if not isinstance(target, torch.Tensor) or target.numel() == 0:
        return None
    low = float(target.detach().min())
    if low >= NEGATIVE:
        return None
    return Misfed(
        "logits-as-targets",
        f"a target with entries down to {num(low)}, read as class probabilities: "
        "-target·log p of a negative target falls without bound as p goes to 0, so the "
        "loss has no minimum (a teacher's raw logits where its softmax was meant)",
    )
