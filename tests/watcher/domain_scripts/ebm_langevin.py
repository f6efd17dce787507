"""An energy-based model trained by contrastive divergence (the deep-energy-model
tutorials' loop): a replay buffer, short-run Langevin dynamics whose gradient with respect
to the samples is taken by `.backward()` on the samples, the energy regulariser
alpha * (E(x+)^2 + E(x-)^2). The training forward reads the sampler's last sample, a leaf
that still requires grad. argv[1]:

frozen      the parameters' requires_grad off while sampling (the tutorial's way)
reset       the parameters left on, optimizer.zero_grad() after sampling
chunks      no sampler: a batch that requires grad, backward by chunks into one step
sn          frozen, the last layer spectral-normed (a parametrization) and no regulariser:
            its bias cancels in E(x+) - E(x-), an energy is defined up to a constant
leak        (bug) the parameters left on and zero_grad() before sampling: every Langevin
            step's parameter gradients pile into the update"""

import sys

import torch
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "frozen"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 32), nn.SiLU(), nn.Linear(32, 1))
if MODE == "sn":
    model[2] = nn.utils.parametrizations.spectral_norm(model[2])
opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.0, 0.999))
buffer = torch.rand(256, 2) * 4 - 2


def langevin(x, steps=4, step_size=0.1):
    if MODE in ("frozen", "sn"):
        for p in model.parameters():
            p.requires_grad_(False)
    x.requires_grad_(True)
    for _ in range(steps):
        x.data.add_(0.005 * torch.randn_like(x))
        model(x).sum().backward()
        x.data.add_(-step_size * x.grad.clamp(-0.03, 0.03))
        x.grad.zero_()
    for p in model.parameters():
        p.requires_grad_(True)
    return x


for _ in range(40):
    x_pos = torch.randn(32, 2) * 0.3 + 1.0
    if MODE == "chunks":
        x_pos.requires_grad_(True)
        opt.zero_grad()
        for chunk in x_pos.chunk(4):
            (model(chunk) ** 2).mean().backward()
        opt.step()
        continue
    if MODE == "leak":
        opt.zero_grad()
    idx = torch.randint(0, len(buffer), (32,))
    x_neg = langevin(buffer[idx].clone())
    buffer[idx] = x_neg.detach()
    if MODE != "leak":
        opt.zero_grad()
    e_pos, e_neg = model(torch.cat([x_pos, x_neg])).chunk(2)
    loss = e_pos.mean() - e_neg.mean()
    if MODE != "sn":
        loss = loss + 0.1 * (e_pos**2 + e_neg**2).mean()
    loss.backward()
    opt.step()
