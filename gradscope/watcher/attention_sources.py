"""Which token lookups an attention's queries and keys were computed from: the
EmbeddingBackward0 nodes below them in torch's graph.

A step's attention calls share most of their graph (layer 2's queries pass through layer
1), so one memo per step holds, for every node walked, the lookups below it: the step's
walks together visit each node once. The memo keeps the nodes it names alive until the
step's backward has read them (no id of a freed node is reused meanwhile)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradscope.autograd_walk import NodeWalk, Order, inputs

EMBEDDING = "EmbeddingBackward0"
MAX_NODES = 20_000
"""Nodes walked at most per step, all walks together (a GPT-2's graph is a few thousand)."""
PRODUCTS = {"BmmBackward0": (0, 1), "MmBackward0": (0, 1), "BaddbmmBackward0": (1, 2)}
"""The matrix products that make attention scores, and where their two factors (q, kᵀ)
enter: baddbmm adds a mask first (nn.MultiheadAttention's scores with an attn_mask)."""
NEAR = 8
"""Nodes below the scores searched for their q·kᵀ product."""
NONE: frozenset[int] = frozenset()


@dataclass
class Sources:
    step: int = 0
    below: dict[int, frozenset[int]] = field(default_factory=dict)
    """id(node) → ids of the lookups below it, for the step's walked nodes."""
    held: list[Any] = field(default_factory=list)
    walked: int = 0
    spent: bool = False
    """The step's walks reached MAX_NODES: later calls of the step are not traced."""

    def begin(self, step: int) -> None:
        """Forget another step's graph."""
        if step != self.step:
            self.clear()
            self.step = step

    def clear(self) -> None:
        self.below, self.held, self.walked, self.spent = {}, [], 0, False

    def of(self, node: Any) -> frozenset[int] | None:
        """The ids of the EmbeddingBackward0 nodes below `node` (itself included); None
        where the step's budget ran out first."""
        if node is None:
            return NONE
        if self.spent:
            return None
        below, stack, opened = self.below, [node], set()
        while stack:
            n = stack[-1]
            key = id(n)
            if key in below:
                stack.pop()
                continue
            if type(n).__name__ == EMBEDDING:
                below[key] = frozenset((key,))
                self.held.append(n)
                stack.pop()
                continue
            under = inputs(n)
            if key not in opened:
                opened.add(key)
                self.walked += 1
                if self.walked > MAX_NODES:
                    self.spent = True
                    return None
                stack.extend(u for u in under if id(u) not in below)
                continue
            below[key] = NONE.union(*(below.get(id(u), NONE) for u in under))
            self.held.append(n)
            stack.pop()
        return below[id(node)]


def factors(scores: Any) -> tuple[Any, Any]:
    """The graph nodes of the two factors of attention scores (q and kᵀ), found at the
    q·kᵀ product nearest the scores; the scores' own node twice where none is near."""
    root = getattr(scores, "grad_fn", None)
    if root is None:
        return None, None
    for node in NodeWalk([root], order=Order.NEAREST, limit=NEAR):
        at = PRODUCTS.get(type(node).__name__)
        if at is not None:
            edges = node.next_functions
            return edges[at[0]][0], edges[at[1]][0]
    return root, root
