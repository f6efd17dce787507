# a learning-rate typo (2.0 for 0.02): each SGD step moves the weights by a large fraction
import sys

import torch
from torch import nn

lr = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
torch.manual_seed(0)
centers = torch.randn(4, 8)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=lr)
for _step in range(100):
    y = torch.randint(0, 4, (32,))
    x = centers[y] + 2.0 * torch.randn(32, 8)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
