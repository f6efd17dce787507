"""A GAN whose discriminator step comes first (the DCGAN loop). Modes: `healthy`;
`detached` (the discriminator's optimizer holds the generator's parameters too, but the
fake is detached and the generator's gradients were reset to None: it moves nothing of
G); `reopt` (the discriminator's optimizer built anew every 4 steps); bug `shared` (the
discriminator's optimizer holds the generator's parameters and the fake is not
detached: each D step moves G toward the discriminator's loss)."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
held = [*D.parameters(), *(G.parameters() if MODE in ("detached", "shared") else [])]


def d_optimizer() -> torch.optim.Optimizer:
    return torch.optim.Adam(held, 2e-3, betas=(0.5, 0.999))


opt_g = torch.optim.Adam(G.parameters(), 2e-3, betas=(0.5, 0.999))
opt_d = d_optimizer()
bce = nn.BCEWithLogitsLoss()
centres = torch.tensor([[2.0, 0.0], [-2.0, 0.0]])
for step in range(16):
    if MODE == "reopt" and step % 4 == 0:
        opt_d = d_optimizer()
    x = centres[torch.randint(0, 2, (32,))] + 0.2 * torch.randn(32, 2)
    z = torch.randn(32, 4)
    fake = G(z)
    opt_d.zero_grad()
    seen = fake if MODE == "shared" else fake.detach()
    d_loss = (bce(D(x), torch.ones(32, 1)) + bce(D(seen), torch.zeros(32, 1))) / 2
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = bce(D(G(z)), torch.ones(32, 1))
    g_loss.backward()
    opt_g.step()
