"""Probability targets of a cross-entropy that are no probabilities, read from the graph.

`F.cross_entropy(logits, target)` with a float target of the logits' shape reads the
target as class probabilities and computes -Σ target · log_softmax(logits). Handed a
teacher's raw logits (or any target with a negative entry) in place of its softmax, the
term -target_i · log p_i of a negative target_i falls without bound as p_i goes to 0: the
loss has no minimum, the logits grow until the run turns NaN, and a learning rate looks
to blame. One read of the saved target tensor (a device sync, once per graph read); a
mixup, cut-mix or smoothed target is never negative. A policy gradient written as this
product weighs each action by its signed advantage: it is read apart (`weighs_actions`).
"""

from __future__ import annotations

from typing import Any

import torch

from gradscope.autograd_walk import saved
from gradscope.fmt import num
from gradscope.watcher.loss_inputs import Misfed, first_found, soft_classes, soft_target

SEARCH = 64
"""Nodes searched from the loss: the product sits a few ops below it."""

NEGATIVE = -1e-6
"""Below this a target entry is negative, not a probability rounded below 0."""


def find(loss_node: Any) -> Misfed | None:
    """The first soft-target cross-entropy near the top of the loss's graph whose targets
    hold a negative entry."""
    return first_found(loss_node, read, SEARCH)


def read(node: Any) -> Misfed | None:
    """`node`, the product of targets and a log_softmax (loss_inputs.soft_target), with a
    negative target: the targets are no probabilities (unless they weigh actions)."""
    log_softmax = soft_target(node)
    if log_softmax is None:
        return None
    target = saved(node, "_saved_self", None)
    if not isinstance(target, torch.Tensor):
        target = saved(node, "_saved_other", None)
    if not isinstance(target, torch.Tensor) or target.numel() == 0:
        return None
    low = float(target.detach().min())
    if low >= NEGATIVE or weighs_actions(target.detach(), log_softmax):
        return None
    return Misfed(
        "logits-as-targets",
        f"a target with entries down to {num(low)}, read as class probabilities: "
        "-target·log p of a negative target falls without bound as p goes to 0, so the "
        "loss has no minimum (a teacher's raw logits where its softmax was meant)",
    )


def weighs_actions(target: torch.Tensor, log_softmax: Any) -> bool:
    """A policy gradient's signed weights, not a distribution: one non-zero entry per row
    (the advantage on the action taken, one_hot(a) · A, times log_softmax), or weights whose
    mean under the policy's own probabilities is 0 in every row (advantages A(s, ·) =
    Q(s, ·) - V(s) with V = Σ π·Q: an all-actions policy gradient). A teacher's logits are
    dense and have no such mean."""
    axis = soft_classes(log_softmax)
    if axis is None or target.dim() != len(axis[0]):
        return False
    dim = axis[1]
    if int((target != 0).sum(dim).max()) <= 1:
        return True
    logp = saved(log_softmax, "_saved_result", None)
    if not isinstance(logp, torch.Tensor) or logp.shape != target.shape:
        return False
    mean = (logp.detach().exp() * target).sum(dim)
    return bool((mean.abs() <= 1e-4 * target.abs().sum(dim).clamp_min(1e-12)).all())
