# DeeBERT-style phases: the backbone and the last exit train first, under an optimizer of
# their own; the early exits then train alone, the rest frozen. argv[1] "all": the first
# phase's optimizer holds the early exits too, which its loss never reaches (a bug).
import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
EVERY = len(sys.argv) > 1 and sys.argv[1] == "all"


class Exits(nn.Module):
    def __init__(self, width=16, depth=3, classes=3):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(8 if i == 0 else width, width), nn.ReLU()) for i in range(depth)
        )
        self.exits = nn.ModuleList(nn.Linear(width, classes) for _ in range(depth))

    def forward(self, x):
        outs = []
        for block, exit_ in zip(self.blocks, self.exits, strict=True):
            x = block(x)
            outs.append(exit_(x))
        return outs


net = Exits()
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
early = [p for n, p in net.named_parameters() if n.startswith(("exits.0.", "exits.1."))]
first = [p for p in net.parameters() if EVERY or all(p is not q for q in early)]
opt = torch.optim.AdamW(first, lr=1e-3)
for _ in range(5):
    loss = F.cross_entropy(net(x)[-1], y)
    opt.zero_grad()
    loss.backward()
    opt.step()
for p in first:
    p.requires_grad_(False)
opt = torch.optim.AdamW(early, lr=1e-3)
for _ in range(5):
    loss = sum(F.cross_entropy(out, y) for out in net(x)[:-1])
    opt.zero_grad()
    loss.backward()
    opt.step()
