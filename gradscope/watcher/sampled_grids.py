"""Tensors the graph reads as a grid of values interpolated at points: the input of
`grid_sample` (a Plenoxels or DVGO voxel grid, TensoRF's or K-Planes' feature planes, a
learned triplane), through views only. Their values are the signal the method stores,
set by its own initialisation (a density of 0.1 everywhere), not weights scaled to a
layer's fan-in: a step that moves them by a large fraction of their norm is how such a
grid is fitted (Plenoxels' RMSprop at lr 30, DVGO's Adam at 0.1), not a learning rate too
high for a weight matrix. Read off the graphs of the first backward calls only (a walk of
at most MAX_GRAPH_NODES nodes each); what is found is kept by weak reference."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk
from gradscope.watcher.discover import MAX_GRAPH_NODES

PART = "the sampled-grid search"

READS = 3
"""Backward calls whose graph is read: a grid is sampled in every forward, or in none."""

SAMPLERS = ("GridSampler2DBackward", "GridSampler3DBackward")
VIEWS = (
    "ViewBackward",
    "UnsafeViewBackward",
    "ReshapeAliasBackward",
    "UnsqueezeBackward",
    "SqueezeBackward",
    "ExpandBackward",
    "PermuteBackward",
    "TransposeBackward",
    "SelectBackward",
    "SliceBackward",
    "CloneBackward",
    "ToCopyBackward",
    "AliasBackward",
)
"""Nodes between a grid and the sampler that keep it the grid's values (a plane picked
out of a stack, a batch dimension added)."""
DEPTH = 8


class SampledGrids:
    """id → a weak reference to each tensor found as grid_sample's input."""

    def __init__(self) -> None:
        self.refs: dict[int, weakref.ref[torch.Tensor]] = {}
        self.reads = 0

    def observe(self, roots: list[torch.Tensor]) -> None:
        """The tensors this backward's graph samples as grids."""
        if self.reads >= READS:
            return
        self.reads += 1
        fns = [r.grad_fn for r in roots if r.grad_fn is not None]
        for node in NodeWalk(fns, limit=MAX_GRAPH_NODES):
            if type(node).__name__.startswith(SAMPLERS) and node.next_functions:
                self._note(node.next_functions[0][0])  # the input; [1] is the grid of points

    def _note(self, node: Any) -> None:
        for _ in range(DEPTH):
            if node is None:
                return
            variable = getattr(node, "variable", None)
            if isinstance(variable, torch.Tensor):
                self.refs[id(variable)] = weakref.ref(variable)
                return
            below = [n for n, _ in node.next_functions if n is not None]
            if len(below) != 1 or not type(node).__name__.startswith(VIEWS):
                return
            node = below[0]

    def holds(self, tensor: torch.Tensor) -> bool:
        ref = self.refs.get(id(tensor))
        return ref is not None and ref() is tensor
