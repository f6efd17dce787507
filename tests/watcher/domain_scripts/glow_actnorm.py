"""Glow (Kingma & Dhariwal 2018) on 8-d data: ActNorm with a data-dependent initialisation on
its first batch (set through `.data` under no_grad, after the optimizer was built), an
invertible linear map (log|det| by slogdet) and a zero-initialised affine coupling; the exact
negative log-likelihood. argv: "scaled" multiplies the loss by 1e-9 (every gradient vanishes)."""

import math
import sys

import torch
from torch import nn

torch.manual_seed(0)
SCALE = 1e-9 if sys.argv[1:] == ["scaled"] else 1.0
D = 8


class ActNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.loc = nn.Parameter(torch.zeros(d))
        self.logs = nn.Parameter(torch.zeros(d))
        self.initialised = False

    def forward(self, x):
        if not self.initialised:
            with torch.no_grad():
                self.loc.data.copy_(-x.mean(0))
                self.logs.data.copy_(-torch.log(x.std(0) + 1e-6))
            self.initialised = True
        return (x + self.loc) * self.logs.exp(), self.logs.sum().expand(x.shape[0])


class InvLinear(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.W = nn.Parameter(torch.linalg.qr(torch.randn(d, d))[0])

    def forward(self, x):
        return x @ self.W.T, torch.linalg.slogdet(self.W)[1].expand(x.shape[0])


class Coupling(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d // 2, 32), nn.ReLU(), nn.Linear(32, d))
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x):
        a, b = x.chunk(2, 1)
        s, t = self.net(a).chunk(2, 1)
        s = torch.tanh(s)
        return torch.cat([a, b * s.exp() + t], 1), s.sum(1)


flow = nn.ModuleList(m for _ in range(2) for m in (ActNorm(D), InvLinear(D), Coupling(D)))
opt = torch.optim.Adam(flow.parameters(), lr=1e-3)
A = torch.randn(D, D)
for _step in range(20):
    x = torch.tanh(torch.randn(128, D) @ A) * 3 + 1
    h, logdet = x, torch.zeros(128)
    for layer in flow:
        h, ld = layer(h)
        logdet = logdet + ld
    logp = -0.5 * (h**2).sum(1) - 0.5 * D * math.log(2 * math.pi)
    loss = -(logp + logdet).mean() / D * SCALE
    opt.zero_grad()
    loss.backward()
    opt.step()
