"""A VAE's negative ELBO and a density's NLL, tiny and deterministic. Modes: `vae` (the
reconstruction plus the KL: healthy), `anneal` (the KL weighted up from 0: healthy), `flow`
(an elementwise affine flow's NLL on data 100x narrower than its base: it goes below 0 and
its gradient grows as the fitted scale shrinks, then settles: healthy); bug `klsign` (the KL
subtracted: the loss falls without bound as the posterior's variance grows), `meansign` (the
same with a fixed posterior variance: the fall is the mean's square, far slower)."""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "vae"
X, Z, STEPS = 12, 3, 120
protos = (torch.rand(6, X) < 0.5).float()
if MODE == "flow":
    centre = torch.randn(X)
    shift = nn.Parameter(torch.zeros(X))
    log_scale = nn.Parameter(torch.zeros(X))
    opt = torch.optim.Adam([shift, log_scale], lr=0.1)
else:
    enc = nn.Sequential(nn.Linear(X, 32), nn.Tanh(), nn.Linear(32, 2 * Z))
    dec = nn.Sequential(nn.Linear(Z, 32), nn.Tanh(), nn.Linear(32, X))
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=3e-3)
for step in range(STEPS):
    if MODE == "flow":
        x = centre + 0.01 * torch.randn(32, X)
        u = (x - shift) * torch.exp(-log_scale)
        loss = (0.5 * u**2 + 0.5 * math.log(2 * math.pi) + log_scale).sum(-1).mean()
    else:
        x = protos[torch.randint(0, 6, (32,))]
        mu, logvar = enc(x).chunk(2, 1)
        if MODE == "meansign":  # a fixed unit variance: the KL is the mean's square alone
            logvar = torch.zeros_like(mu)
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu)
        rec = F.binary_cross_entropy_with_logits(dec(z), x, reduction="none").sum(-1).mean()
        kl = 0.5 * (mu**2 + logvar.exp() - logvar - 1).sum(-1).mean()
        beta = min(1.0, step / 60) if MODE == "anneal" else 1.0
        loss = rec - kl if MODE in ("klsign", "meansign") else rec + beta * kl
    opt.zero_grad()
    loss.backward()
    opt.step()
