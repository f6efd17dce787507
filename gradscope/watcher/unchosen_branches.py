"""Leaves that reach the loss only through a branch of torch.where that its condition never
chose: every gradient to them is exactly 0, though they are in the graph. A multi-start
decoder (POMO) that fixes each rollout's first node never reaches the step whose context
is a learned placeholder, read as torch.where(step == 0, placeholder, previous); a padding
row picked by a condition that is never true is another. "Check that it takes part in the
loss" is the wrong advice for them: GS413 names the branch instead (rules/zero_derivative.py).

Read alongside the zero-derivative ops (watcher/flat_ops.py), in the graphs of the first
backward calls only: one walk that does not go down an unchosen branch, one below those
branches; a leaf reached only by the second lies behind them alone."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk, inputs, saved
from gradscope.watcher.discover import MAX_GRAPH_NODES


def unchosen_leaves(fns: list[Any]) -> list[torch.Tensor]:
    """The leaves below `fns` that every path reaches through a torch.where branch whose
    condition selected none of it (all False for the first, all True for the second)."""
    skipped: list[Any] = []

    def chosen(node: Any) -> list[Any]:
        if type(node).__name__ != "WhereBackward0":
            return inputs(node)
        kept: list[Any] = []
        for branch, taken in _branches(node):
            (kept if taken else skipped).append(branch)
        return [n for n in kept if n is not None]

    walk = NodeWalk(fns, chosen, limit=MAX_GRAPH_NODES)
    reached = {id(leaf) for node in walk if (leaf := _leaf(node)) is not None}
    if walk.pending:  # a graph past the bound: what the chosen branches reach is not known
        return []
    behind = [n for n in skipped if n is not None]
    out: dict[int, torch.Tensor] = {}
    for node in NodeWalk(behind, limit=MAX_GRAPH_NODES):
        leaf = _leaf(node)
        if leaf is not None and id(leaf) not in reached:
            out[id(leaf)] = leaf
    return list(out.values())


def _branches(node: Any) -> list[tuple[Any, bool]]:
    """(the node below each of where's two inputs, whether the condition chose any of it);
    both chosen where the condition cannot be read."""
    below = [n for n, _ in node.next_functions]
    condition = saved(node, "_saved_condition")
    if not isinstance(condition, torch.Tensor) or len(below) != 2:
        return [(n, True) for n in below]
    try:
        some, every = bool(condition.any()), bool(condition.all())
    except RuntimeError:  # a tensor without values (a fake or meta one)
        return [(n, True) for n in below]
    return [(below[0], some), (below[1], not every)]


def _leaf(node: Any) -> torch.Tensor | None:
    """The leaf an AccumulateGrad node adds to."""
    leaf = getattr(node, "variable", None)
    return leaf if isinstance(leaf, torch.Tensor) else None
