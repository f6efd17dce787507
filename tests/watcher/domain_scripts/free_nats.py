"""A world model's KL held at its free-nats floor (Dreamer): the KL between the posterior and
a learned prior is clamped from below, so while it sits under the floor the prior gets no
gradient, by design. argv: "clamp" (torch.clamp(kl, min=...), the default), "maximum"
(torch.maximum(kl, floor)), "vector" (a floor per latent dimension), "above" (a floor the KL
is over: the prior learns), "falls" (free nats, torch.clamp(kl, min=4.0): the KL
starts over the floor and falls under it for good, the prior learning until then); bugs "dead"
(the prior behind a ReLU whose bias keeps it off, the KL over its floor), "dead-clamp" (the
same ReLU written as .clamp(min=0)) and "frozen" (the prior frozen by requires_grad_(False) at
step 10 and never thawed, the KL over its floor)."""

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
LONG = MODE in ("falls", "frozen")
if LONG:
    nn.init.constant_(wm.prior.bias, 2.0)
rest = [p for n, p in wm.named_parameters() if not n.startswith("prior")]
groups = [{"params": rest}, {"params": wm.prior.parameters(), "lr": 0.05 if LONG else 1e-3}]
opt = torch.optim.Adam(groups, lr=1e-3)
for _step in range(40 if LONG else 3):
    if MODE == "frozen" and _step == 10:
        wm.prior.requires_grad_(False)
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
    elif MODE == "falls":
        kl_term = torch.clamp(kl.sum(-1).mean(), min=4.0)
    elif MODE in ("above", "frozen") or MODE.startswith("dead"):
        kl_term = torch.clamp(kl.sum(-1).mean(), min=1e-3)
    else:
        kl_term = torch.clamp(kl.sum(-1).mean(), min=100.0)
    loss = rec + kl_term
    opt.zero_grad()
    loss.backward()
    opt.step()
    if LONG:
        print(_step, round(kl.sum(-1).mean().item(), 3))
