"""A small classifier under Adam; argv: the learning rate, and "no-zero-grad" to leave the
gradients piling up."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
lr = float(sys.argv[1])
net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(net.parameters(), lr=lr)
x = torch.randn(512, 16)
y = (x[:, :4] + 0.3 * torch.randn(512, 4)).argmax(1)
for _step in range(120):
    i = torch.randint(0, 512, (64,))
    loss = nn.functional.cross_entropy(net(x[i]), y[i])
    if "no-zero-grad" not in sys.argv:
        opt.zero_grad()
    loss.backward()
    opt.step()
