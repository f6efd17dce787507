"""A classifier with reparametrized layers (torch.nn.utils.parametrizations: weight_norm's
original0/original1, orthogonal's original), the optimizer built after them.

argv: `healthy`; bugs `in-place` (weight_norm applied to a layer after the optimizer was
built: its weight becomes two new tensors), `replaced` (a layer replaced by a new
weight-normed one after the optimizer was built, before the first step), `replaced-orthogonal`
(the same with orthogonal).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.parametrizations import orthogonal, weight_norm

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"

net = nn.Sequential(
    weight_norm(nn.Linear(8, 16)),
    nn.ReLU(),
    orthogonal(nn.Linear(16, 16)),
    nn.Tanh(),
    nn.Linear(16, 3),
)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
if MODE == "in-place":
    weight_norm(net[4])
elif MODE == "replaced":
    net[0] = weight_norm(nn.Linear(8, 16))
elif MODE == "replaced-orthogonal":
    net[2] = orthogonal(nn.Linear(16, 16))
proto = torch.randn(3, 8)
for _ in range(20):
    y = torch.randint(0, 3, (32,))
    loss = F.cross_entropy(net(proto[y] + 0.5 * torch.randn(32, 8)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final", loss.item())
