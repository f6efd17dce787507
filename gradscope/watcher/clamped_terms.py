"""Leaves the loss reaches only through a clamp (or a max, a min) whose input is entirely on
the far side of its bound: Dreamer's KL held at its free-nats floor
(`torch.clamp(kl, min=free_nats)`, `torch.maximum(kl, free)`) passes no gradient to the
prior, by design, until the KL rises above the floor. A short run can end before it does:
GS413 then tells the zeros as the floor's, not as a layer cut off the loss.

Read off the graphs of the first backward calls (before the backward frees the clamp's
saved input and bound), a walk of at most MAX_GRAPH_NODES nodes each; the leaves are kept
by weak reference. The inspector reads the same floor in its one pass (clamped_off.py)."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, inputs, saved
from gradscope.watcher.discover import MAX_GRAPH_NODES

PART = "the clamped-term search"

READS = 3
"""Backward calls whose graph is read: a floor the KL starts under holds at the first ones."""


class ClampedTerms:
    """id → a weak reference to a leaf every path from a loss read reaches through a
    clamp at its bound."""

    def __init__(self) -> None:
        self.behind: dict[int, weakref.ref[torch.Tensor]] = {}
        self.floored: dict[int, weakref.ref[torch.Tensor]] = {}
        """Leaves below a floor on a loss term, at its bound or not: their gradient has the
        term's share only at the steps the term is above the floor."""
        self.reads = 0

    def observe(self, roots: list[torch.Tensor]) -> None:
        """The leaves this backward's loss reaches only through a clamp at its bound, and
        those below any floor on a loss term."""
        if self.reads >= READS:
            return
        self.reads += 1
        floors: list[Any] = []
        fns = [r.grad_fn for r in roots if r.grad_fn is not None]
        for leaf in _held_off(fns, floors):
            self.behind.setdefault(id(leaf), weakref.ref(leaf))
        walk = NodeWalk(floors, limit=MAX_GRAPH_NODES)
        for leaf in [x for node in walk if (x := _variable(node)) is not None]:
            self.floored.setdefault(id(leaf), weakref.ref(leaf))

    def holds(self, tensor: torch.Tensor) -> bool:
        held = self.behind.get(id(tensor))
        return held is not None and held() is tensor

    def below_floor(self, tensor: torch.Tensor) -> bool:
        held = self.floored.get(id(tensor))
        return held is not None and held() is tensor


def _held_off(fns: list[Any], floors: list[Any]) -> list[torch.Tensor]:
    """The leaves below the at-bound nodes that no other path from `fns` reaches (none
    where either walk was cut short by its bound); every floor on a loss term met is
    added to `floors`."""
    off: list[Any] = []

    def live_below(node: Any) -> list[Any]:
        if _on_a_term(node):
            floors.append(node)
        if at_bound(node):
            off.append(node)
            return []
        return inputs(node)

    live_walk = NodeWalk(fns, live_below, limit=MAX_GRAPH_NODES)
    live = {id(leaf) for node in live_walk if (leaf := _variable(node)) is not None}
    if not off or live_walk.pending:
        return []
    behind_walk = NodeWalk(off, limit=MAX_GRAPH_NODES)
    behind = [leaf for node in behind_walk if (leaf := _variable(node)) is not None]
    return [] if behind_walk.pending else [t for t in behind if id(t) not in live]


def _variable(node: Any) -> torch.Tensor | None:
    leaf = getattr(node, "variable", None)
    return leaf if isinstance(leaf, torch.Tensor) else None


def at_bound(node: Any) -> bool:
    """The clamp, max or min this node differentiates is a floor (or ceiling) on a loss term,
    a reduced quantity, and passes no gradient to it."""
    return _on_a_term(node) and _passes_none(node)


def _on_a_term(node: Any) -> bool:
    """Its input is a reduced quantity (one number, or a mean or sum over a batch): a floor
    on a loss term. An activation clamped elementwise (`h.clamp(min=0)` as a ReLU) all on the
    far side is a dead layer, which GS106 keeps warning of."""
    name = node.name()
    if not name.startswith(("Clamp", "Maximum", "Minimum")):
        return False
    x = saved(node, "_saved_self")  # None: freed, or saved under the script's hooks
    if x is None:
        return False
    made_by = [n.name() for n, _ in node.next_functions if n is not None]
    return x.numel() == 1 or any(n.startswith(("MeanBackward", "SumBackward")) for n in made_by)


def _passes_none(node: Any) -> bool:
    name = node.name()
    try:
        x = saved(node, "_saved_self")
        if x is None:
            return False
        if name.startswith("ClampMinBackward"):
            return _all(x < node._saved_min)
        if name.startswith("ClampMaxBackward"):
            return _all(x > node._saved_max)
        if name.startswith("ClampBackward"):
            low, high = node._saved_min, node._saved_max
            return (low is not None and _all(x < low)) or (high is not None and _all(x > high))
        if name.startswith(("MaximumBackward", "MinimumBackward")):
            return _bounded_by_constant(node, name.startswith("Maximum"))
    except RuntimeError:  # its saved operands already freed
        return False
    return False


def _bounded_by_constant(node: Any, maximum: bool) -> bool:
    """max(x, c) with x below c everywhere (min: above), c carrying no gradient."""
    nexts = [n for n, _ in node.next_functions]
    if len(nexts) != 2 or (nexts[0] is None) == (nexts[1] is None):
        return False
    x, c = (saved(node, "_saved_self"), saved(node, "_saved_other"))
    if x is None or c is None:
        return False
    if nexts[0] is None:
        x, c = c, x
    return _all(x < c) if maximum else _all(x > c)


def _all(below: Any) -> bool:
    return bool(torch.as_tensor(below).all()) if torch.as_tensor(below).numel() else False
