"""Parameters a softmax reads as its very logits, through views and constant scalings only
(DARTS's architecture weights, a mixture's weights): numbers in nats, whose scale is the
softmax's, not their initial values' (initialised near 0 for a uniform start, they grow
from nothing). Found on the logits probe's sampled steps; no read back to the host."""

from __future__ import annotations

import weakref
from typing import Any

import torch

THROUGH = (
    "SelectBackward",
    "UnbindBackward",
    "ViewBackward",
    "UnsafeViewBackward",
    "ReshapeAliasBackward",
    "SliceBackward",
    "ExpandBackward",
    "TBackward",
    "TransposeBackward",
    "PermuteBackward",
    "UnsqueezeBackward",
    "SqueezeBackward",
    "CloneBackward",
    "MulBackward",
    "DivBackward",
)
"""Nodes between a parameter and the logits that keep them the parameter's values (a
view, or a scaling by a constant: one input that carries a gradient)."""
DEPTH = 8
LIMIT = 64


class LogitTables:
    """id → a weak reference to each parameter found as a softmax's logits."""

    def __init__(self) -> None:
        self.refs: dict[int, weakref.ref[torch.Tensor]] = {}

    def note(self, scores: Any) -> None:
        """The parameter `scores` is a view or a constant scaling of, if any."""
        node = getattr(scores, "grad_fn", None)
        for _ in range(DEPTH):
            if node is None or len(self.refs) >= LIMIT:
                return
            variable = getattr(node, "variable", None)
            if isinstance(variable, torch.Tensor):
                self.refs[id(variable)] = weakref.ref(variable)
                return
            below = [n for n, _ in node.next_functions if n is not None]
            if len(below) != 1 or not node.name().startswith(THROUGH):
                return
            node = below[0]

    def holds(self, tensor: torch.Tensor) -> bool:
        ref = self.refs.get(id(tensor))
        return ref is not None and ref() is tensor
