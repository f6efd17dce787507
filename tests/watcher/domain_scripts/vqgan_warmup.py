"""A VQGAN-style autoencoder (Esser et al. 2021): L1 plus a frozen feature loss plus a GAN
term weighted by the adaptive weight ‖∇ rec‖ / ‖∇ gan‖ on the decoder's last layer
(autograd.grad, retain_graph), the GAN term switched off by a factor of 0 until the
discriminator starts (taming-transformers' adopt_weight). argv: "float" (the factor a Python
0.0, not a tensor); bugs "dead" (the GAN term on from the start, the discriminator's ReLU dead:
its bias far negative), "mask" (the GAN term multiplied by a mask that is all off)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else ""
enc = nn.Sequential(nn.Conv2d(1, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 4, 3, 1, 1))
dec = nn.Sequential(nn.ConvTranspose2d(4, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 1, 3, 1, 1))
disc = nn.Sequential(nn.Conv2d(1, 8, 4, 2, 1), nn.ReLU(), nn.Conv2d(8, 1, 3, 1, 1))
feat = nn.Sequential(nn.Conv2d(1, 4, 3, 1, 1), nn.ReLU()).requires_grad_(False)
if MODE == "dead":
    nn.init.constant_(disc[0].bias, -100.0)
opt_ae = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=1e-3, betas=(0.5, 0.9))
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.9))
DISC_START = 0 if MODE in ("dead", "mask") else 10
base = torch.randn(4, 1, 8, 8)


def adopt_weight(step):
    on = step >= DISC_START
    if MODE == "float":
        return 1.0 if on else 0.0
    return torch.tensor(1.0 if on else 0.0)


def adaptive_weight(rec, gan):
    last = dec[-1].weight
    g1 = torch.autograd.grad(rec, last, retain_graph=True)[0]
    g2 = torch.autograd.grad(gan, last, retain_graph=True)[0]
    return (g1.norm() / (g2.norm() + 1e-4)).clamp(0, 1e4).detach()


for step in range(20):
    x = base[torch.randint(0, 4, (8,))] + 0.05 * torch.randn(8, 1, 8, 8)
    xr = dec(enc(x))
    rec = (x - xr).abs().mean() + F.mse_loss(feat(xr), feat(x))
    logits = disc(xr)
    if MODE == "mask":
        logits = logits * torch.zeros_like(logits)
    gan = -logits.mean()
    w = adaptive_weight(rec, gan) if step >= DISC_START else torch.tensor(1.0)
    loss = rec + 0.5 * w * adopt_weight(step) * gan
    opt_ae.zero_grad()
    loss.backward()
    opt_ae.step()
    if step >= DISC_START:
        d_loss = 0.5 * (F.relu(1 - disc(x)).mean() + F.relu(1 + disc(xr.detach())).mean())
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
