"""Gradient noise (Neelakantan et al. 2015) after clip_grad_norm_, under SGD with momentum.
Modes: `decaying` (sigma² = 0.01 / (1 + t)^0.55: healthy, the noise within what the clip's bound
allows the update), `plain` (the clip alone); bug `growing` (the schedule inverted, sigma = (1 +
t)^0.55: the step applies a gradient far above max_norm and the loss diverges)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "decaying"
net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
protos = torch.randn(4, 8)
for step in range(60):
    y = torch.randint(0, 4, (32,))
    x = protos[y] + 0.5 * torch.randn(32, 8)
    loss = F.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    if MODE != "plain":
        sigma = (0.01 / (1 + step) ** 0.55) ** 0.5 if MODE == "decaying" else (1 + step) ** 0.55
        for p in net.parameters():
            p.grad.add_(torch.randn_like(p.grad) * sigma)
    opt.step()
