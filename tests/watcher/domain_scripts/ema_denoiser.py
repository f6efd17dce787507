# An EDM-style denoiser (Karras et al. 2022: c_skip/c_out/c_in/c_noise preconditioning, log-normal
# sigma, loss weight (s^2 + sd^2) / (s * sd)^2) with an EMA copy of its weights.
# argv: healthy (the EMA under requires_grad_(False)); ema-trained (bug: the loss computed through
# the EMA copy, the optimizer over the online network); ema-grad (the EMA's output added to the loss
# without no_grad while the online network trains too: gradients that no step applies).
import copy
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"
SD = 0.5


class Precond(nn.Module):
    def __init__(self):
        super().__init__()
        self.F = nn.Sequential(nn.Linear(3, 32), nn.SiLU(), nn.Linear(32, 2))

    def forward(self, x, s):
        c_skip, c_out = SD**2 / (s**2 + SD**2), s * SD / (s**2 + SD**2).sqrt()
        c_in, c_noise = 1 / (SD**2 + s**2).sqrt(), s.log() / 4
        return c_skip * x + c_out * self.F(torch.cat([c_in * x, c_noise], 1))


net = Precond()
ema = copy.deepcopy(net).requires_grad_(MODE != "healthy")
opt = torch.optim.Adam(net.parameters(), lr=2e-3)
for _step in range(40):
    u = torch.rand(64, 1) * 4 - 2
    y = torch.cat([u * 0.35, 0.5 * torch.sin(1.5 * u)], 1)
    s = (torch.randn(64, 1) * 1.2 - 1.2).exp()
    w = (s**2 + SD**2) / (s * SD) ** 2
    x = y + torch.randn_like(y) * s
    trained = ema if MODE == "ema-trained" else net
    loss = (w * (trained(x, s) - y) ** 2).sum(1).mean()
    if MODE == "ema-grad":
        loss = loss + 0.1 * (w * (ema(x, s) - y) ** 2).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for p, q in zip(ema.parameters(), net.parameters(), strict=True):
            p.lerp_(q, 1 - 0.99)
