"""Hard per-sample gates on residual blocks (ConvNet-AIG, Veit & Belongie 2018): a gate's
two logits plus Gumbel noise, the block kept where "on" wins. Modes: `st` (the hard
Gumbel-softmax with its straight-through gradient); bugs `argmax` (the noise drawn by hand
with `-torch.empty_like(logits).exponential_().log()` and the gate an argmax: no gradient
reaches the gate), `detached` (the logits detached before the Gumbel-softmax)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "st"
D = 8


class GatedBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(D, D)
        self.gate = nn.Linear(D, 2)

    def forward(self, x):
        logits = self.gate(x)
        if MODE == "argmax":
            noise = -torch.empty_like(logits).exponential_().log()
            on = (logits + noise).argmax(-1).float()
        else:
            source = logits.detach() if MODE == "detached" else logits
            on = F.gumbel_softmax(source, tau=1.0, hard=True)[:, 1]
        return x + on[:, None] * torch.relu(self.body(x))


net = nn.Sequential(nn.Linear(4, D), GatedBlock(), GatedBlock(), nn.Linear(D, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
X = torch.randn(128, 4)
Y = (X[:, 0] > 0).long()
for _ in range(4):
    idx = torch.randint(0, 128, (32,))
    loss = F.cross_entropy(net(X[idx]), Y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
