"""A Gaussian likelihood head (DeepAR-style) whose scale is the layer's output used raw: the
negative log-likelihood takes log(scale), NaN wherever the scale came out negative. Mode
`softplus` passes it through softplus first (healthy); `relu` through a ReLU (a scale of
exactly 0: log gives -inf at the log's edge, not below its domain).

Usage: gaussian_scale.py [raw|softplus|relu]
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

MODE = sys.argv[1] if len(sys.argv) > 1 else "raw"
torch.manual_seed(0)
net = nn.Linear(4, 2)
with torch.no_grad():
    net.bias.copy_(torch.tensor([0.0, -0.5]))  # the scale's head starts below 0 for some rows
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(32, 4), torch.randn(32)
    mu, raw = net(x).unbind(-1)
    scale = {"softplus": F.softplus, "relu": F.relu}.get(MODE, lambda v: v)(raw)
    loss = (torch.log(scale) + 0.5 * ((y - mu) / scale) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
