"""Deep ensembles (Lakshminarayanan et al.): M Gaussian-NLL regressors, each its own Adam.
`healthy`: each member built anew and shuffled on its own. `shuffled_copies`: members are
deepcopies of one network but each gets its own data order (they differ from the first
step). Bug `copies`: deepcopies of one network fed one data order: M optimizers, one model."""

import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
M, N, B = 3, 128, 32
x = torch.rand(N, 1) * 6 - 3
y = x**3 / 5 + 0.3 * torch.randn(N, 1)


def member():
    return nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 2))


if mode == "healthy":
    members = [member() for _ in range(M)]
else:
    first = member()
    members = [copy.deepcopy(first) for _ in range(M)]
opts = [torch.optim.Adam(m.parameters(), lr=3e-3) for m in members]
for _epoch in range(4):
    if mode == "copies":
        perms = [torch.randperm(N)] * M
    else:
        perms = [torch.randperm(N) for _ in range(M)]
    for i in range(0, N, B):
        for m, opt, perm in zip(members, opts, perms, strict=True):
            idx = perm[i : i + B]
            out = m(x[idx])
            loss = F.gaussian_nll_loss(out[:, :1], y[idx], F.softplus(out[:, 1:]) + 1e-6)
            opt.zero_grad()
            loss.backward()
            opt.step()
