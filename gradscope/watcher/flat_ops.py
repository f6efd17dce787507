"""Leaves that reach the loss through an op whose derivative is zero wherever it is defined
(`torch.sign`, `round`, `floor`, `ceil`, `trunc`): a binarised or quantised layer written
without a straight-through estimator; or through a custom autograd.Function (one whose
backward returns zeros blocks everything below it). Their weights are in the graph, yet
every gradient that reaches them is exactly 0, so "check that it takes part in the loss"
is the wrong advice: GS413 names the op instead. Leaves behind a torch.where branch that
its condition never chose are kept here too (watcher/unchosen_branches.py).

Read off the graphs of the first backward calls only (a walk of at most MAX_GRAPH_NODES
nodes each); what is below such a node is kept by weak reference.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from gradscope.autograd_walk import (
    CANCELLED,
    CUSTOM_FUNCTION,
    WHERE_UNCHOSEN,
    ZERO_POINT,
    ZERO_POINT_NODES,
    NodeWalk,
    cancelled_term,
    flat_op,
)
from gradscope.watcher.discover import MAX_GRAPH_NODES
from gradscope.watcher.unchosen_branches import unchosen_leaves

PART = "the zero-derivative op search"

READS = 3
"""Backward calls whose graph is read: a layer is binarised in every forward, or in none;
READS more once another optimizer stepped (a float model's training, then its
quantization-aware copy's under an optimizer of its own)."""


class FlatOps:
    """id → (a weak reference to a leaf below a zero-derivative node or a custom Function's,
    that op's name: `torch.sign`, or `Function SignSTE`)."""

    def __init__(self) -> None:
        self.below: dict[int, tuple[weakref.ref[torch.Tensor], str]] = {}
        self.reads = 0
        self.optimizers = 0
        """The optimizers that had stepped when the reads began."""

    def due(self, optimizers: int) -> bool:
        """Whether this backward's graph is read: one of the first READS, or of the first
        READS since another optimizer stepped."""
        if optimizers > self.optimizers:
            self.optimizers, self.reads = optimizers, 0
        return self.reads < READS

    def observe(self, roots: list[torch.Tensor]) -> None:
        """The leaves below the zero-derivative nodes of this backward's graph."""
        if self.reads >= READS:
            return
        self.reads += 1
        fns = [r.grad_fn for r in roots if r.grad_fn is not None]
        flat: dict[str, list[Any]] = {}
        zero_points: list[torch.Tensor] = []
        for node in NodeWalk(fns, limit=MAX_GRAPH_NODES):
            zero_points += _zero_point(node)
            op = flat_op(node)
            if op is not None:  # x + (y - x): what lies below x only
                flat.setdefault(op, []).append(cancelled_term(node) if op == CANCELLED else node)
        for op, nodes in sorted(flat.items(), key=_custom_last):  # one walk per op
            for under in NodeWalk(nodes, limit=MAX_GRAPH_NODES):
                leaf = _variable(under)
                if leaf is not None and id(leaf) not in self.below:
                    self.below[id(leaf)] = (weakref.ref(leaf), op)
        for leaf in unchosen_leaves(fns):
            self.below.setdefault(id(leaf), (weakref.ref(leaf), WHERE_UNCHOSEN))
        for leaf in zero_points:
            self.below.setdefault(id(leaf), (weakref.ref(leaf), ZERO_POINT))

    def op_above(self, tensor: torch.Tensor) -> str | None:
        """The zero-derivative op this tensor lies below in the graphs read (None: none)."""
        held = self.below.get(id(tensor))
        return held[1] if held is not None and held[0]() is tensor else None


def _custom_last(item: tuple[str, list[Any]]) -> bool:
    """Step functions claim their leaves before custom Functions do: torch.round's zeros are
    certain, while a custom Function nearer the loss (a likelihood's lower bound) may pass
    the gradient on, so a leaf below both is told of the round."""
    return item[0].startswith(CUSTOM_FUNCTION)


def _zero_point(node: Any) -> list[torch.Tensor]:
    """The leaf a learnable fake quantizer takes as its zero point, where it takes one."""
    if type(node).__name__ not in ZERO_POINT_NODES or len(node.next_functions) < 3:
        return []
    leaf = _variable(node.next_functions[2][0])
    return [leaf] if leaf is not None else []


def _variable(node: Any) -> torch.Tensor | None:
    """The leaf an AccumulateGrad node adds to."""
    leaf = getattr(node, "variable", None)
    return leaf if isinstance(leaf, torch.Tensor) else None
