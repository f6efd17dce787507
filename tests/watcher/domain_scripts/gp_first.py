"""WGAN-GP (Gulrajani et al. 2017) with the critic's gradient penalty given its own
backward first, then the Wasserstein terms': the penalty reaches its interpolated input
through a gradient taken with create_graph, and its parameter gradients are meant for the
critic's step (healthy)."""

import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
og = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.5, 0.9))
od = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.9))
for _ in range(20):
    for _ in range(2):
        real = torch.randn(64, 2) * 0.3 + torch.tensor([2.0, -1.0])
        fake = G(torch.randn(64, 4)).detach()
        eps = torch.rand(64, 1)
        mixed = (eps * real + (1 - eps) * fake).requires_grad_(True)
        (grad,) = torch.autograd.grad(D(mixed).sum(), mixed, create_graph=True)
        od.zero_grad()
        (10 * ((grad.norm(dim=1) - 1) ** 2).mean()).backward()
        (D(fake).mean() - D(real).mean()).backward()
        od.step()
    og.zero_grad()
    (-D(G(torch.randn(64, 4))).mean()).backward()
    og.step()
