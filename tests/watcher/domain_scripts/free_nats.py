"""A world model's KL held at its free-nats floor (Dreamer): the KL between the posterior and
a learned prior is clamped from below, so while it sits under the floor the prior gets no
gradient, by design. argv: "clamp" (torch.clamp(kl, min=...), the default), "maximum"
(torch.maximum(kl, floor)), "vector" (a floor per latent dimension), "above" (a floor the KL
is over: the prior learns); bugs "dead" (the prior behind a ReLU whose bias keeps it off, the
KL over its floor) and "dead-clamp" (the same ReLU written as .clamp(min=0))."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "clamp"
H, Z, B = 8, 4, 16


class WorldModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(H, H)
        self.prior = nn.Linear(H, Z)
        self.post = nn.Linear(H, Z)
        self.dec = nn.Linear(Z, H)


wm = WorldModel()
if MODE.startswith("dead"):
    nn.init.constant_(wm.prior.bias, -50.0)
opt = torch.optim.Adam(wm.parameters(), lr=1e-3)
for _step in range(3):
    x = torch.randn(B, H)
    h = torch.tanh(wm.enc(x))
    prior_mean = wm.prior(h)
    if MODE == "dead":
        prior_mean = F.relu(prior_mean)
    elif MODE == "dead-clamp":
        prior_mean = prior_mean.clamp(min=0)
    z = wm.post(h)
    kl = 0.5 * (z - prior_mean).pow(2)  # unit-variance Gaussians, per latent dimension
    rec = F.mse_loss(wm.dec(z), x)
    if MODE == "maximum":
        kl_term = torch.maximum(kl.sum(-1).mean(), torch.tensor(100.0))
    elif MODE == "vector":
        kl_term = torch.clamp(kl.mean(0), min=torch.full((Z,), 100.0)).sum()
    elif MODE == "above" or MODE.startswith("dead"):
        kl_term = torch.clamp(kl.sum(-1).mean(), min=1e-3)
    else:
        kl_term = torch.clamp(kl.sum(-1).mean(), min=100.0)
    loss = rec + kl_term
    opt.zero_grad()
    loss.backward()
    opt.step()
