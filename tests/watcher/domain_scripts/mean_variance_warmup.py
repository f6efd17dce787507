"""A heteroscedastic regression trained as its public recipes do: the mean head alone (MSE)
for a warm-up, then mean and log-variance together (Gaussian NLL). The variance head runs at
every step and reaches the loss only after the warm-up. argv: `detached`, the bug: the
log-variance detached, so its head never learns."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
detached = sys.argv[1:] == ["detached"]
x = torch.rand(128, 1) * 6 - 3
y = torch.sin(x) + (0.1 + 0.3 * x.abs()) * torch.randn_like(x)


class MeanVariance(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 16), nn.Tanh())
        self.mean, self.log_var = nn.Linear(16, 1), nn.Linear(16, 1)

    def forward(self, x):
        h = self.body(x)
        return self.mean(h), self.log_var(h)


model = MeanVariance()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for step in range(8):
    mu, lv = model(x)
    if detached:
        lv = lv.detach()
    if step < 3:
        loss = nn.functional.mse_loss(mu, y)
    else:
        loss = nn.functional.gaussian_nll_loss(mu, y, lv.exp())
    opt.zero_grad()
    loss.backward()
    opt.step()
