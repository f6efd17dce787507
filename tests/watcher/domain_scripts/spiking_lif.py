"""A leaky integrate-and-fire network trained through time (snnTorch's tutorial loop): the
membrane integrates a linear layer's input, a spike is a step of the membrane over its
threshold, the reset subtracts the detached spike, the loss a cross-entropy on the output
layer's membrane at every time step.

argv: `surrogate` (a custom Function: Heaviside forward, fast-sigmoid backward), `mask`
(the comparison only selects: torch.where keeps the membrane where it fired); bugs
`heaviside` (a plain (mem > threshold).float(): no gradient reaches the first layer),
`detached` (the surrogate's spikes .detach()ed on the way to the next layer).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "surrogate"
STEPS, BETA = 8, 0.9


class FastSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (25 * v.abs() + 1) ** 2


def spike(v):
    if MODE == "heaviside":
        return (v > 0).float()
    if MODE == "mask":
        return torch.where(v > 0, torch.sigmoid(v), torch.zeros_like(v))
    s = FastSigmoid.apply(v)
    return s.detach() if MODE == "detached" else s


class LIFNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden, self.out = nn.Linear(20, 32), nn.Linear(32, 4)

    def forward(self, x):
        mem1, mem2, mems = torch.zeros(16, 32), torch.zeros(16, 4), []
        for t in range(STEPS):
            mem1 = BETA * mem1 + self.hidden(x[t])
            s1 = spike(mem1 - 1.0)
            mem1 = mem1 - s1.detach()
            mem2 = BETA * mem2 + self.out(s1)
            mems.append(mem2)
        return torch.stack(mems)


net = LIFNet()
opt = torch.optim.Adam(net.parameters(), lr=5e-4)
x = torch.bernoulli(torch.full((STEPS, 16, 20), 0.3))
y = torch.randint(0, 4, (16,))
for _ in range(3):
    loss = sum(F.cross_entropy(m, y) for m in net(x))
    opt.zero_grad()
    loss.backward()
    opt.step()
