"""Leaves of an output the script differentiates by `torch.autograd.grad` without
create_graph, other than the variables it differentiates against: a bilevel loop's
hyper-parameter (a weight decay in the inner loss), dataset distillation's synthetic
inputs. The derivative comes back outside the graph, so an unrolled step `w - lr * g` built
on it sends them nothing: GS413 tells a parameter that never got a gradient so.

The walk stops at a variable that has a graph of its own (a decoder's output that a loss
balancer differentiates each loss against, then backpropagates itself by
`output.backward(weighted_grad)`): the derivative is taken there, and what lies behind it
is reached by that later backward, not by this call.

Read at the first READS such calls with grad mode on, a walk of at most MAX_GRAPH_NODES
nodes each; the leaves are kept by weak reference."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk
from gradscope.autograd_walk import inputs as inputs_of
from gradscope.watcher.discover import MAX_GRAPH_NODES

READS = 8
"""autograd.grad calls read: an inner loop differentiates the same graph at every step."""


class PlainDerivatives:
    """id → a weak reference to a leaf of an output differentiated without create_graph."""

    def __init__(self) -> None:
        self.refs: dict[int, weakref.ref[torch.Tensor]] = {}
        self.reads = 0

    def note(self, outputs: Any, inputs: Any) -> None:
        """The leaves `outputs` reach, less those among `inputs`."""
        if self.reads >= READS or not torch.is_grad_enabled():
            return
        if not isinstance(inputs, (torch.Tensor, tuple, list)):
            return  # an iterator autograd.grad consumed: the variables are not known
        self.reads += 1
        variables = {id(t) for t in _tensors(inputs)}
        behind = {id(t.grad_fn) for t in _tensors(inputs) if t.grad_fn is not None}
        roots = [t.grad_fn for t in _tensors(outputs) if t.grad_fn is not None]

        def below(node: Any) -> list[Any]:
            return [] if id(node) in behind else inputs_of(node)

        for node in NodeWalk(roots, below, limit=MAX_GRAPH_NODES):
            leaf = getattr(node, "variable", None)
            if isinstance(leaf, torch.Tensor) and id(leaf) not in variables:
                self.refs.setdefault(id(leaf), weakref.ref(leaf))

    def holds(self, tensor: torch.Tensor) -> bool:
        """The tensor took part in an output differentiated without create_graph."""
        ref = self.refs.get(id(tensor))
        return ref is not None and ref() is tensor


def _tensors(value: Any) -> list[torch.Tensor]:
    many = (value,) if isinstance(value, torch.Tensor) else value
    if not isinstance(many, (tuple, list)):
        return []
    return [t for t in many if isinstance(t, torch.Tensor)]
