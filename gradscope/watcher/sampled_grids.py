"""Tensors the graph reads at positions rather than multiplies: the input of `grid_sample`
(a Plenoxels or DVGO voxel grid, TensoRF's or K-Planes' feature planes, a learned
triplane), and tables read by index (an embedding lookup, a hash grid's table, an
auto-decoder's latent codes), through views only. Their values are what the method
stores, at a scale its own initialisation chose (a density of 0.1 everywhere, hash entries
within ±1e-4 so that the first predictions are near 0), not weights scaled to a layer's
fan-in: a grid moved by a large fraction of its norm per step is how it is fitted
(Plenoxels' RMSprop at lr 30, DVGO's Adam at 0.1), and a table's initial size is no
measure of the lr. Read off the graphs of the first backward calls only (a walk of at
most MAX_GRAPH_NODES nodes each); what is found is kept by weak reference."""

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
LOOKUPS = ("EmbeddingBackward", "EmbeddingBagBackward", "IndexBackward")
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
    """id → a weak reference to each tensor found as grid_sample's input (`grids`) or as
    the table of a lookup by index (`tables`)."""

    def __init__(self) -> None:
        self.grids: dict[int, weakref.ref[torch.Tensor]] = {}
        self.tables: dict[int, weakref.ref[torch.Tensor]] = {}
        self.reads = 0

    def observe(self, roots: list[torch.Tensor]) -> None:
        """The tensors this backward's graph samples as grids or looks up as tables."""
        if self.reads >= READS:
            return
        self.reads += 1
        fns = [r.grad_fn for r in roots if r.grad_fn is not None]
        for node in NodeWalk(fns, limit=MAX_GRAPH_NODES):
            name = type(node).__name__
            if not node.next_functions:
                continue
            if name.startswith(SAMPLERS):  # [0] the input; [1] the grid of points
                _note(self.grids, node.next_functions[0][0])
            elif name.startswith(LOOKUPS):  # [0] the table (a lookup's indices take none)
                _note(self.tables, node.next_functions[0][0])

    def holds(self, tensor: torch.Tensor) -> bool:
        """grid_sample reads it as its grid."""
        return _held(self.grids, tensor)

    def looks_up(self, tensor: torch.Tensor) -> bool:
        """A lookup by index reads it as its table."""
        return _held(self.tables, tensor)


def _note(refs: dict[int, weakref.ref[torch.Tensor]], node: Any) -> None:
    """The leaf under `node` through views only, if any, into `refs`."""
    for _ in range(DEPTH):
        if node is None:
            return
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            refs[id(variable)] = weakref.ref(variable)
            return
        below = [n for n, _ in node.next_functions if n is not None]
        if len(below) != 1 or not type(node).__name__.startswith(VIEWS):
            return
        node = below[0]


def _held(refs: dict[int, weakref.ref[torch.Tensor]], tensor: torch.Tensor) -> bool:
    ref = refs.get(id(tensor))
    return ref is not None and ref() is tensor
