"""Decoupled greedy layer-wise training (Belilovsky et al. 2019), the loop forward-forward
shares: three blocks, each with an auxiliary head, its own loss and its own SGD, stepped
one after the other on the same batch, each block's input the previous block's output
detached, so no gradient crosses blocks.

argv: "healthy"; bug "attached" (the .detach() forgotten: the second block's backward
reaches the first block's graph, freed by its own backward, and the script dies at step 2).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
blocks = nn.ModuleList([nn.Linear(6, 8), nn.Linear(8, 8), nn.Linear(8, 8)])
heads = nn.ModuleList([nn.Linear(8, 3) for _ in blocks])
opts = [
    torch.optim.SGD([*b.parameters(), *h.parameters()], lr=0.05, momentum=0.9)
    for b, h in zip(blocks, heads, strict=True)
]
x_all, y_all = torch.randn(64, 6), torch.randint(0, 3, (64,))
for step in range(4):
    x, y = x_all[step * 16 : step * 16 + 16], y_all[step * 16 : step * 16 + 16]
    h = x
    for block, head, opt in zip(blocks, heads, opts, strict=True):
        h = torch.relu(block(h if MODE == "attached" else h.detach()))
        loss = F.cross_entropy(head(h), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
