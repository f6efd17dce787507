"""A slimmable network (Yu et al. 2019): the same layers run at several widths, each width
with a BatchNorm of its own (switchable BatchNorm), the gradients of every width summed
before one step. Modes: `switchable`; bug `shared` (the widest BatchNorm, sliced, serves
every width: the others never run)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "switchable"
WIDTHS = (4, 8)


class SwitchableBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.ModuleList(nn.BatchNorm1d(w) for w in WIDTHS)
        self.width = WIDTHS[-1]

    def forward(self, x):
        if MODE == "shared":
            bn = self.bn[-1]
            n = x.shape[1]
            return F.batch_norm(x, None, None, bn.weight[:n], bn.bias[:n], True)
        bn = self.bn[WIDTHS.index(self.width)]
        return bn(x)


class SlimNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, WIDTHS[-1])
        self.norm = SwitchableBN()
        self.head = nn.Linear(WIDTHS[-1], 2)

    def forward(self, x):
        w = self.norm.width
        h = torch.relu(self.norm(F.linear(x, self.fc.weight[:w], self.fc.bias[:w])))
        return F.linear(h, self.head.weight[:, :w], self.head.bias)


net = SlimNet()
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
X = torch.randn(128, 6)
Y = (X[:, 0] > 0).long()
for _ in range(3):
    idx = torch.randint(0, 128, (16,))
    opt.zero_grad()
    for w in reversed(WIDTHS):
        net.norm.width = w
        F.cross_entropy(net(X[idx]), Y[idx]).backward()
    opt.step()
