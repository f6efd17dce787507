"""Which optimizers' tensors lie below each trained tensor's op in the loss's graph: the
gradient on its way to them passes through that op whatever the tensor's own flags. A
head kept fixed above an encoder that adapts (TTT's rotation head at test time) must be
differentiated through for the encoder to get its gradient, and only its own weights'
gradients are extra; a backbone left unfrozen below a head-only optimizer, or a teacher
beside its student, is differentiated for nothing (rules/step_outside.py's retired case).

Read at the first backward after an optimizer's first step, once two optimizers or more
have stepped (the graph's structure, not its values, is what is read: a run of one
optimizer reads nothing, one of two stepping from the start reads once), the latest read
kept: one walk of the graph (bounded by MAX_NODES, ~5 µs a node) that carries, from the
leaves up, a bit per optimizer holding a leaf below each node."""

from __future__ import annotations

from typing import Any

PART = "the walk of the graph below each trained tensor's op"
MAX_NODES = 50_000
"""A graph larger than this is not read: the facts stay as the last read left them."""


def owners(optimizers: list[Any]) -> dict[int, int]:
    """id(tensor) → the bits of the optimizers (by index) whose param groups hold it."""
    out: dict[int, int] = {}
    for k, optimizer in enumerate(optimizers):
        for group in getattr(optimizer, "param_groups", ()):
            for p in group["params"]:
                out[id(p)] = out.get(id(p), 0) | (1 << k)
    return out


def below_each_leaf(roots: list[Any], held: dict[int, int]) -> dict[int, int] | None:
    """id(leaf tensor) → the bits (`held`) of the leaves below the ops that read it, other
    than itself; None for a graph of more than MAX_NODES nodes."""
    walk = _Walk(held)
    stack: list[tuple[Any, bool]] = [(r.grad_fn, False) for r in roots if r.grad_fn is not None]
    seen = 0
    while stack:
        node, done = stack.pop()
        if done:
            walk.combine(node)
            continue
        if id(node) in walk.masks:
            continue
        seen += 1
        if seen > MAX_NODES:
            return None
        walk.masks[id(node)] = 0  # reached again before it is combined: a DAG never is
        stack.append((node, True))
        stack.extend((n, False) for n, _ in node.next_functions if n is not None)
    return walk.out


class _Walk:
    def __init__(self, held: dict[int, int]) -> None:
        self.held = held
        self.masks: dict[int, int] = {}
        """id(node) → the bits of the leaves below it."""
        self.views: dict[int, int] = {}
        """id(node) → the leaf it is, or a view of (a weight's transpose, cast or reshape:
        one input, itself a leaf or such a view)."""
        self.out: dict[int, int] = {}

    def combine(self, node: Any) -> None:
        """A node's bits: its own leaf's, or its inputs'; each leaf it reads (or a view of
        one) is told the bits of its other inputs (a layer's weight is not below its bias)."""
        variable = getattr(node, "variable", None)
        if variable is not None:  # AccumulateGrad
            self.masks[id(node)] = self.held.get(id(variable), 0)
            self.views[id(node)] = id(variable)
            return
        inputs = [n for n, _ in node.next_functions if n is not None]
        if len(inputs) == 1 and id(inputs[0]) in self.views:
            self.views[id(node)] = self.views[id(inputs[0])]
        total = below = 0
        leaves = []
        for n in inputs:
            bits = self.masks.get(id(n), 0)
            total |= bits
            if id(n) in self.views:
                leaves.append(self.views[id(n)])
            else:
                below |= bits
        self.masks[id(node)] = total
        for leaf in leaves:
            self.out[leaf] = self.out.get(leaf, 0) | below
