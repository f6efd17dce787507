"""DeepAR (Salinas et al.): an LSTM over a series fed its previous value, a Gaussian NLL whose
sigma is learned (softplus), scaled by each series' mean level. As sigma shrinks the
gradient grows as 1/sigma^2: the norm moves to a new, noisy level (x10) while the loss
falls. Bug `bad_batch`: the horizon of 8 series of step 150 is off by 100 (a corrupted
batch)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
mode = sys.argv[1] if len(sys.argv) > 1 else "healthy"
L, H = 24, 8


def series(n):
    t = torch.arange(L + H).float()
    ph = torch.rand(n, 1) * 6.28
    lvl = torch.randn(n, 1) * 5 + 10
    return lvl + 2 * torch.sin(t / 3 + ph) + 0.1 * torch.randn(n, L + H)


class DeepAR(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(2, 32, batch_first=True)
        self.mu = nn.Linear(32, 1)
        self.sig = nn.Linear(32, 1)

    def forward(self, z, scale):
        prev = torch.cat([torch.zeros_like(z[:, :1]), z[:, :-1]], 1) / scale  # teacher forcing
        t = torch.arange(z.shape[1]).float().expand_as(z) / z.shape[1]
        h, _ = self.rnn(torch.stack([prev, t], -1))
        sigma = F.softplus(self.sig(h)).squeeze(-1) * scale + 1e-3
        return self.mu(h).squeeze(-1) * scale, sigma


model = DeepAR()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(200):
    s = series(64)
    if mode == "bad_batch" and step == 149:
        s[:8, L:] += 100
    scale = s[:, :L].abs().mean(1, keepdim=True) + 1
    mu, sig = model(s, scale)
    loss = -torch.distributions.Normal(mu, sig).log_prob(s).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 40 == 0:
        print(step, round(loss.item(), 3))
