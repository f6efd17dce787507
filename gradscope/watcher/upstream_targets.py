"""A distance whose target is attached and lies on its own input's path: the prediction is
computed from the very tensor it is trained to match (DINOSAUR's decoder reconstructing the
encoder's features, with the encoder's forward attached and the encoder in the optimizer).
The loss then also moves the target toward the prediction: a constant tensor makes it 0, so
encoder and decoder can settle there together (collapse). Read off the graph: the loss
node's target edge is a node the input edge reaches below it. No value is read."""

from __future__ import annotations

from typing import Any

from gradscope.autograd_walk import NodeWalk

KINDS = frozenset({"mse", "smooth_l1", "huber"})
"""Losses whose node has an input edge and a target edge, in that order."""

WALKED = 4096
"""Nodes of the input's graph walked at most."""


def on_input_path(node: Any) -> bool:
    """The target of loss node `node` was computed by the graph (not data, not a leaf) and
    the input's graph reads that very output (the same node and output index): the input
    was made from the target. Two views' embeddings (VICReg's invariance term) meet only at
    shared weights, and two chunks of one batched output are two outputs of one node, so
    neither is this."""
    edges: tuple[Any, ...] = getattr(node, "next_functions", ())
    if len(edges) < 2 or edges[0][0] is None or edges[1][0] is None:
        return False
    source, (target, index) = edges[0][0], edges[1]
    if type(target).__name__ == "AccumulateGrad" or edges[0] == edges[1]:
        return False
    for below in NodeWalk([source], limit=WALKED):
        if any(n is target and i == index for n, i in getattr(below, "next_functions", ())):
            return True
    return False
