"""Continual learning with EWC (Kirkpatrick et al. 2017): task A, then at the switch a
Fisher estimate from 20 of task A's batches, each its own backward after model.zero_grad()
with the squared gradients read, then task B under the penalty. MODE: ewc (healthy: the
Fisher's backward calls come between steps, not inside one) or wiped (an accumulation of 4
micro-batches with zero_grad inside it from the switch on: a bug). Then STEPS."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

mode = sys.argv[1] if len(sys.argv) > 1 else "ewc"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 60
switch = steps // 2
torch.manual_seed(0)
wa, wb = torch.randn(20, 5), torch.randn(20, 5)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)


def batch(w):
    x = torch.randn(64, 20)
    return x, (x @ w).argmax(1)


fisher, anchor = None, None
for step in range(steps):
    if step == switch and mode == "ewc":
        fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        for _ in range(20):
            x, y = batch(wa)
            model.zero_grad()
            F.cross_entropy(model(x), y).backward()
            for n, p in model.named_parameters():
                fisher[n] += p.grad**2 / 20
        anchor = {n: p.detach().clone() for n, p in model.named_parameters()}
    micro = 4 if mode == "wiped" and step >= switch else 1
    for _ in range(micro):
        x, y = batch(wa if step < switch else wb)
        loss = F.cross_entropy(model(x), y)
        if fisher is not None:
            penalty = sum(
                (fisher[n] * (p - anchor[n]) ** 2).sum() for n, p in model.named_parameters()
            )
            loss = loss + 50 * penalty
        opt.zero_grad()
        (loss / micro).backward()
    opt.step()
