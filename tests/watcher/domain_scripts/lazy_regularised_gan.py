"""StyleGAN2's lazy regularisation (Karras et al. 2020) on 2-d data: a mapping network at
1/100 of the synthesis lr (its own param group), the non-saturating loss, and every k steps
R1 on the discriminator and the path-length penalty (an EMA of path lengths) on the
generator, each its own backward and optimizer step, scaled by k. argv: bug "spike" (one
batch of real data 30x too large at step 60)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
SPIKE = sys.argv[1:] == ["spike"]
Z, K = 8, 4
mapping = nn.Sequential(nn.Linear(Z, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16))
synth = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
c = K / (K + 1)
opt_g = torch.optim.Adam(
    [{"params": synth.parameters()}, {"params": mapping.parameters(), "lr": 2e-5}],
    lr=2e-3 * c,
    betas=(0.0, 0.99**c),
)
opt_d = torch.optim.Adam(D.parameters(), lr=2e-3 * c, betas=(0.0, 0.99**c))
pl_mean = torch.zeros(())


def real(n):
    a = torch.randint(0, 8, (n,)).float() * (2 * math.pi / 8)
    return torch.stack([a.cos(), a.sin()], 1) * 2 + 0.05 * torch.randn(n, 2)


for step in range(80):
    x = real(32) * (30.0 if SPIKE and step == 60 else 1.0)
    fake = synth(mapping(torch.randn(32, Z)))
    d_loss = F.softplus(D(fake.detach())).mean() + F.softplus(-D(x)).mean()
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    if step % K == 0:
        xr = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(D(xr).sum(), xr, create_graph=True)
        r1 = g.pow(2).sum(1).mean() * 5 * K
        opt_d.zero_grad()
        r1.backward()
        opt_d.step()
    g_loss = F.softplus(-D(synth(mapping(torch.randn(32, Z))))).mean()
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    if step % K == 0:
        w = mapping(torch.randn(16, Z))
        img = synth(w)
        (g,) = torch.autograd.grad(
            (img * torch.randn_like(img)).sum() / math.sqrt(2), w, create_graph=True
        )
        lengths = g.pow(2).sum(1).sqrt()
        pl_mean = pl_mean.lerp(lengths.mean().detach(), 0.01)
        pl = (lengths - pl_mean).pow(2).mean() * 2 * K
        opt_g.zero_grad()
        pl.backward()
        opt_g.step()
