"""Optimal-transport and point-cloud losses training a generator to match a target cloud,
in plain torch as geomloss and POT compute them (tiny configs).

argv: mode steps
  unrolled  log-domain Sinkhorn (logsumexp), its 20 iterations unrolled in the graph
  envelope  the same, its plan computed under no_grad (the envelope theorem)
  sliced    sliced Wasserstein: 16 random projections drawn afresh at every step
  chamfer   a Chamfer distance, both ways
"""

import math
import sys

import torch
from torch import nn

mode = sys.argv[1]
steps = int(sys.argv[2])
torch.manual_seed(0)
N = 32


def target(n):
    t = torch.rand(n) * math.pi
    return torch.stack([torch.cos(t), torch.sin(t)], 1) + 0.05 * torch.randn(n, 2)


def cost(x, y):
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)


def sinkhorn(x, y, reg=0.05, iters=20, detached=False):
    C = cost(x, y)
    n, m = C.shape
    loga, logb = torch.full((n,), -math.log(n)), torch.full((m,), -math.log(m))
    f, g = torch.zeros(n), torch.zeros(m)
    K = C.detach() if detached else C
    with torch.set_grad_enabled(not detached):
        for _ in range(iters):
            f = -reg * torch.logsumexp(logb[None, :] + (g[None, :] - K) / reg, dim=1)
            g = -reg * torch.logsumexp(loga[:, None] + (f[:, None] - K) / reg, dim=0)
        plan = (loga[:, None] + logb[None, :] + (f[:, None] + g[None, :] - K) / reg).exp()
    return (plan * C).sum()


def sliced(x, y, projections=16):
    theta = torch.randn(2, projections)
    theta = theta / theta.norm(dim=0, keepdim=True)
    return (((x @ theta).sort(0).values - (y @ theta).sort(0).values) ** 2).mean()


def chamfer(x, y):
    d = cost(x, y)
    return d.min(1).values.mean() + d.min(0).values.mean()


LOSSES = {
    "unrolled": sinkhorn,
    "envelope": lambda x, y: sinkhorn(x, y, detached=True),
    "sliced": sliced,
    "chamfer": chamfer,
}
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
opt = torch.optim.Adam(G.parameters(), lr=1e-3)
for _ in range(steps):
    loss = LOSSES[mode](G(torch.randn(N, 8)), target(N))
    opt.zero_grad()
    loss.backward()
    opt.step()
