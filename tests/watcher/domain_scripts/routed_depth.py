"""Mixture-of-Depths (Raposo et al. 2024): a router scores every token, the top-k go through
the block and the rest skip it; each routed token's output is scaled by its router weight,
which is how the router gets a gradient. Modes: `scaled`; bug `indices` (the router read
only for its top-k indices: it never learns)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "scaled"
D, T, K = 8, 6, 2


class RoutedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.router = nn.Linear(D, 1)
        self.block = nn.Sequential(nn.Linear(D, D), nn.GELU())

    def forward(self, x):
        scores = self.router(x).squeeze(-1)
        top = scores.topk(K, dim=-1)
        index = top.indices[..., None].expand(-1, -1, D)
        chosen = x.gather(1, index)
        delta = self.block(chosen)
        if MODE == "scaled":
            delta = delta * top.values[..., None]
        return x.scatter_add(1, index, delta)


net = nn.Sequential(nn.Linear(4, D), RoutedBlock(), RoutedBlock())
head = nn.Linear(D, 2)
opt = torch.optim.Adam([*net.parameters(), *head.parameters()], lr=1e-3)
for _ in range(3):
    x = torch.randn(16, T, 4)
    y = (x[:, :, 0].sum(1) > 0).long()
    loss = F.cross_entropy(head(net(x).mean(1)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
