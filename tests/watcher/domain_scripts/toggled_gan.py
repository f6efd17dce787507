"""A GAN stepped as Lightning's manual optimization steps it: each optimizer toggled
(`toggle_optimizer` sets requires_grad False on every parameter it does not step, so the
generator's backward does not reach the discriminator), its gradients clipped, stepped,
reset, untoggled. Modes: `healthy`; `no-zero-grad` (the discriminator's reset
forgotten)."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(G.parameters(), 2e-3, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), 2e-3, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
centres = torch.tensor([[2.0, 0.0], [-2.0, 0.0]])


def frozen(module: nn.Module, on: bool) -> None:
    for p in module.parameters():
        p.requires_grad_(not on)


for _ in range(12):
    x = centres[torch.randint(0, 2, (32,))] + 0.2 * torch.randn(32, 2)
    z = torch.randn(32, 4)
    frozen(D, True)  # toggle_optimizer(opt_g)
    g_loss = bce(D(G(z)), torch.ones(32, 1))
    g_loss.backward()
    nn.utils.clip_grad_norm_(G.parameters(), 1.0)
    opt_g.step()
    opt_g.zero_grad()
    frozen(D, False)
    frozen(G, True)  # toggle_optimizer(opt_d)
    fake = G(z).detach()
    d_loss = (bce(D(x), torch.ones(32, 1)) + bce(D(fake), torch.zeros(32, 1))) / 2
    d_loss.backward()
    nn.utils.clip_grad_norm_(D.parameters(), 1.0)
    opt_d.step()
    if MODE != "no-zero-grad":
        opt_d.zero_grad()
    frozen(G, False)
