"""Tensors the script makes anew each step with requires_grad, at module level: WGAN-GP's
interpolated input (Gulrajani et al. 2017: a gradient penalty through create_graph) and
FGSM adversarial training's input (Goodfellow et al. 2015: x.grad read for the attack).
Healthy: they are inputs, not parameters. KIND: wgan_gp | fgsm; then STEPS."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

kind = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.manual_seed(0)
if kind == "wgan_gp":
    G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    D = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    og = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.5, 0.9))
    od = torch.optim.Adam(D.parameters(), lr=1e-4, betas=(0.5, 0.9))
    for _ in range(steps):
        r = torch.randn(64, 2) * 0.3 + torch.tensor([2.0, -1.0])
        f = G(torch.randn(64, 8)).detach()
        eps = torch.rand(64, 1)
        xh = (eps * r + (1 - eps) * f).requires_grad_(True)
        g = torch.autograd.grad(D(xh).sum(), xh, create_graph=True)[0]
        gp = ((g.norm(dim=1) - 1) ** 2).mean()
        d_loss = D(f).mean() - D(r).mean() + 10 * gp
        od.zero_grad()
        d_loss.backward()
        od.step()
        g_loss = -D(G(torch.randn(64, 8))).mean()
        og.zero_grad()
        g_loss.backward()
        og.step()
else:
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = torch.randn(10, 3)
    for _ in range(steps):
        x = torch.randn(64, 10)
        y = (x @ w).argmax(1)
        x.requires_grad_(True)
        F.cross_entropy(model(x), y).backward()
        x = (x + 0.05 * x.grad.sign()).detach()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
