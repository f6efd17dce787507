"""GS413 told apart: a heterogeneous graph layer's messages into a node type the loss
never reads. PyTorch Geometric's HeteroConv (and to_hetero) hold one conv per edge type,
keyed `<src___rel___dst>` (to_hetero: `src__rel__dst`); a model trained on one node
type's labels computes every type's output in its last layer and reads one, so the convs
into the other types get no gradient there while the same relation's conv in an earlier
layer does (torch_geometric examples/hetero/hetero_conv_dblp.py). Information: nothing is
cut that the model needs. No torch."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import WatchRun

_EDGE_KEY = re.compile(
    r"^(?P<layer>.*?)\.(?:<(?P<a>[^.]+?)___(?P<b>[^.]+?)___(?P<c>[^.]+?)>"
    r"|(?P<x>[^.<>]+?)__(?P<y>[^.<>]+?)__(?P<z>[^.<>]+?))\.(?P<rest>.+)$"
)
"""`conv2.convs.<paper___cites___paper>.lin_l.weight` or `conv2.paper__cites__paper.lin.weight`."""


@dataclass(frozen=True)
class Unread:
    layer: str
    """The heterogeneous layer (`conv2.convs`)."""
    dst: str
    """The node type its messages go to."""
    relation: str
    """The edge type, as PyG names it."""


def _edge(name: str) -> tuple[str, str, str, str] | None:
    """(layer, edge key, destination type, rest) of a per-edge-type parameter's name."""
    m = _EDGE_KEY.match(name)
    if m is None:
        return None
    dst = m["c"] or m["z"]
    key = name[len(m["layer"]) + 1 : len(name) - len(m["rest"]) - 1]
    return m["layer"], key, dst, m["rest"]


def unread_node_type(
    run: WatchRun, i: int, got_grad: Callable[[WatchRun, int], bool]
) -> Unread | None:
    """The parameter is in a per-edge-type conv of a heterogeneous layer; no conv of that
    layer into the same node type got a gradient, some conv into another type did (the
    layer ran and the loss reached it), and the same relation's parameter in another layer
    learned (the relation itself is wired): only this layer's output for that node type
    feeds nothing. A relation that never learns in any layer is not this."""
    names = [p.name for p in run.params]
    own = _edge(names[i])
    if own is None:
        return None
    layer, key, dst, _ = own
    same_layer = [(j, e) for j, n in enumerate(names) if (e := _edge(n)) and e[0] == layer]
    into_dst = [j for j, e in same_layer if e[2] == dst]
    elsewhere = [j for j, e in same_layer if e[2] != dst]
    if any(got_grad(run, j) for j in into_dst) or not any(got_grad(run, j) for j in elsewhere):
        return None
    other_layers = [
        j for j, n in enumerate(names) if (e := _edge(n)) and e[0] != layer and e[1:] == own[1:]
    ]
    if not any(got_grad(run, j) for j in other_layers):
        return None
    return Unread(layer, dst, key)


def as_information(finding: Finding, unread: Unread) -> Finding:
    """GS413 as information on a conv whose node type's output nothing reads."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; it is in {unread.layer}'s conv for {unread.relation}, "
        f"and no conv of that layer into node type {unread.dst} got a gradient while the "
        "same relation learned in another layer: the loss reads no output of this layer "
        f"for {unread.dst} (a model trained on another node type's labels)",
        advice=f"fine if the loss is meant to read other node types only: the layer's "
        f"{unread.dst} output is computed for nothing (drop its edge types into {unread.dst} "
        f"from that layer to save compute); if {unread.dst}'s labels should train it, add "
        "their loss",
    )
