"""Cosine similarities handed to cross_entropy as logits with no temperature.

An in-batch contrastive loss (InfoNCE, CLIP's, sentence-transformers'
MultipleNegativesRankingLoss where it calls cross_entropy) scores each pair by the cosine of two
normalised embeddings, a value in [-1, 1], and divides by a temperature (multiplies by a scale:
20 in sentence-transformers, 1/0.07 in CLIP) before cross_entropy. Left at 1, the logits of C
candidates differ by 2 at most: the softmax can never put more than e / (e + (C-1)/e) on the
right one, so the loss stays above ln(1 + (C-1)·e^-2) (1.1 for 16 candidates) and its gradients
shrink as it nears it. Read off the graph at the first step: a matrix product of two
row-normalised inputs (x / ‖x‖, F.normalize's division by a norm) under cross_entropy's
log_softmax, through views and transposes, and between them no factor but a constant 1. A
learned or any other scale is a temperature: said nothing. One host read of a scalar the script
wrote as a Python number. A loss written as logsumexp minus the positive's logit (sentence-
transformers 6's) has no cross_entropy to read under: not judged."""

from __future__ import annotations

import math
from typing import Any

import torch

from gradscope.autograd_walk import SAME_VALUES, inputs, saved

_THROUGH = SAME_VALUES | {"TBackward0"}
_PRODUCTS = {"MmBackward0", "BmmBackward0"}
_NORMS = {"LinalgVectorNormBackward0", "NormBackward0", "NormBackward1", "NormBackward2"}
_SCALES = {"MulBackward0", "DivBackward0"}
DIVISOR_DEPTH = 4
"""Nodes followed down a division's divisor to its norm: expand, clamp_min, a norm."""


def floor(classes: int) -> float:
    """The lowest cross_entropy of C candidates whose logits lie in [-1, 1]."""
    return math.log1p((classes - 1) * math.exp(-2.0))


def unscaled(log_softmax: Any) -> bool:
    """`log_softmax` (cross_entropy's own) normalises cosine similarities with no scale."""
    node = _down(inputs(log_softmax)[0] if inputs(log_softmax) else None)
    if node is not None and type(node).__name__ in _SCALES:
        if len(inputs(node)) != 1 or not _one(saved(node, "_saved_other")):
            return False
        node = _down(inputs(node)[0])
    if node is None or type(node).__name__ not in _PRODUCTS or len(inputs(node)) != 2:
        return False
    return all(_normalised(_down(factor)) for factor in inputs(node))


def _down(node: Any) -> Any:
    for _ in range(8):
        if node is None or type(node).__name__ not in _THROUGH or not inputs(node):
            return node
        node = inputs(node)[0]
    return node


def _one(value: Any) -> bool:
    """A constant factor of exactly 1 (a Python number autograd saved as a 0-d CPU tensor)."""
    if not isinstance(value, torch.Tensor) or value.numel() != 1 or value.device.type != "cpu":
        return False
    return value.requires_grad is False and float(value) == 1.0


def _normalised(node: Any) -> bool:
    """A division of rows by their norm: x / ‖x‖ (F.normalize, a hand-written one)."""
    if node is None or type(node).__name__ != "DivBackward0" or len(inputs(node)) != 2:
        return False
    divisor = inputs(node)[1]
    for _ in range(DIVISOR_DEPTH):
        if type(divisor).__name__ in _NORMS:
            return True
        if not inputs(divisor):
            return False
        divisor = inputs(divisor)[0]
    return type(divisor).__name__ in _NORMS
