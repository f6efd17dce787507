"""GS413 on a heterogeneous GNN trained on one node type's labels: PyTorch Geometric's
HeteroConv (torch_geometric/nn/conv/hetero_conv.py) holds one conv per edge type in a
ModuleDict keyed `<src___rel___dst>` (to_hetero: `src__rel__dst`) and returns every node
type's output; the loss reads `paper` only, so the last layer's convs into `author` get no
gradient while the same relation's conv in the first layer does. Information, said as that;
a relation cut in every layer still warns."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import gradscope
from gradscope.findings import Severity

EDGES = (
    ("paper", "cites", "paper"),
    ("author", "writes", "paper"),
    ("paper", "rev_writes", "author"),
)
NODES = {"paper": 6, "author": 4}


class HeteroLayer(nn.Module):
    """One conv per edge type; messages summed per destination type (HeteroConv's aggr='sum')."""

    def __init__(self, key: str):
        super().__init__()
        self.keys = {edge: key.format(*edge) for edge in EDGES}
        self.convs = nn.ModuleDict({k: nn.Linear(8, 8) for k in self.keys.values()})

    def forward(self, x, adj, cut):
        out: dict[str, torch.Tensor] = {}
        for edge, key in self.keys.items():
            message = adj[edge] @ self.convs[key](x[edge[0]])
            out[edge[2]] = out.get(edge[2], 0) + (message.detach() if edge == cut else message)
        return {k: torch.relu(v) for k, v in out.items()}


def _never_updated(key: str, cut: tuple[str, str, str] | None = None) -> dict[str, Severity]:
    torch.manual_seed(0)
    c1, c2, head = HeteroLayer(key), HeteroLayer(key), nn.Linear(8, 3)
    model = nn.ModuleDict({"c1": c1, "c2": c2, "head": head})
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    x = {t: torch.randn(n, 8) for t, n in NODES.items()}
    adj = {e: (torch.rand(NODES[e[2]], NODES[e[0]]) < 0.5).float() for e in EDGES}
    y = torch.randint(0, 3, (NODES["paper"],))
    with gradscope.watch() as w:
        for _ in range(3):
            out = head(c2(c1(x, adj, cut), adj, cut)["paper"])
            loss = nn.functional.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {f.subject: f.severity for f in w.report.findings if f.rule == "GS413"}


@pytest.mark.parametrize("key", ["<{}___{}___{}>", "{}__{}__{}"])
def test_the_last_layers_convs_into_an_unread_node_type_are_information(key):
    found = _never_updated(key)
    into_author = "c2.convs." + key.format("paper", "rev_writes", "author")
    assert found == {into_author + ".weight": Severity.INFO, into_author + ".bias": Severity.INFO}


def test_a_relation_cut_in_every_layer_still_warns():
    found = _never_updated("<{}___{}___{}>", cut=("author", "writes", "paper"))
    assert found["c1.convs.<author___writes___paper>.weight"] == Severity.WARNING
    assert found["c2.convs.<author___writes___paper>.weight"] == Severity.WARNING
