"""Learned step-size quantisation (LSQ, Esser et al. 2020): 4-bit weights and activations,
each quantiser's step size a parameter initialised from the first batch, its gradient
scaled by 1 / sqrt(numel * Qp), rounding passed straight through; SGD with momentum, the
step sizes in a param group of their own without weight decay, as the paper trains them.

argv: `healthy`, `small-decay` (the step sizes decayed at 1e-4 like the weights); bug
`decayed` (weight decay 5 on the step sizes: they shrink to 0, every quantiser saturates
and no gradient passes).
"""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "healthy"


class LSQ(nn.Module):
    def __init__(self, bits, signed):
        super().__init__()
        self.qn = -(2 ** (bits - 1)) if signed else 0
        self.qp = 2 ** (bits - 1) - 1 if signed else 2**bits - 1
        self.s = nn.Parameter(torch.tensor(1.0))
        self.ready = False

    def forward(self, x):
        if not self.ready:
            with torch.no_grad():
                self.s.copy_(2 * x.abs().mean() / math.sqrt(self.qp))
            self.ready = True
        g = 1.0 / math.sqrt(x.numel() * self.qp)
        s = (self.s - self.s * g).detach() + self.s * g
        q = (x / s).clamp(self.qn, self.qp)
        return ((q.round() - q).detach() + q) * s


class QLinear(nn.Linear):
    def __init__(self, i, o):
        super().__init__(i, o)
        self.wq, self.aq = LSQ(4, True), LSQ(4, False)

    def forward(self, x):
        return F.linear(self.aq(x), self.wq(self.weight), self.bias)


model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), QLinear(32, 32), nn.ReLU(), QLinear(32, 4))
steps = [p for n, p in model.named_parameters() if n.endswith(".s")]
rest = [p for n, p in model.named_parameters() if not n.endswith(".s")]
decay = {"healthy": 0.0, "small-decay": 1e-4, "decayed": 5.0}[MODE]
opt = torch.optim.SGD(
    [{"params": rest, "weight_decay": 1e-4}, {"params": steps, "weight_decay": decay}],
    lr=0.02,
    momentum=0.9,
)
proto = torch.randn(4, 16)
for _ in range(120):
    y = torch.randint(0, 4, (32,))
    loss = F.cross_entropy(model(proto[y] + 0.8 * torch.randn(32, 16)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("final", loss.item(), [round(s.item(), 5) for s in steps])
