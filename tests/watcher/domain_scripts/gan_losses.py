"""A GAN on 8 Gaussian modes with the hinge loss (BigGAN, SAGAN): the generator's loss is
-D(G(z)), signed, and drifts up through 0 as the discriminator learns (healthy).
`spike`: the generator's loss of step 150 summed over its batch, not averaged (a loss
scaled by mistake: it jumps 128 times, once)."""

import sys

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "hinge"
Z, N = 8, 128


def mlp(i, o):
    return nn.Sequential(
        nn.Linear(i, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, o)
    )


G, D = mlp(Z, 2), mlp(2, 1)
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.0, 0.99))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.0, 0.99))
angles = torch.arange(8) * (2 * torch.pi / 8)
modes = torch.stack([angles.cos(), angles.sin()], 1) * 2

for step in range(200):
    real = modes[torch.randint(0, 8, (N,))] + 0.05 * torch.randn(N, 2)
    fake = G(torch.randn(N, Z))
    d_loss = F.relu(1 - D(real)).mean() + F.relu(1 + D(fake.detach())).mean()
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    g_loss = -(D(fake).sum() if MODE == "spike" and step == 150 else D(fake).mean())
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
