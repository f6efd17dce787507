"""A hand-written leaky integrate-and-fire network whose neurons keep their membrane on the
module between forwards (as snnTorch's `init_hidden=True` and spikingjelly's neurons do),
trained by BPTT over each batch's time steps: a SuperSpike surrogate (Heaviside forward,
fast-sigmoid derivative backward), the reset subtracting the detached spike.

argv: `reset` (each neuron's state reset before each batch); bugs `stale` (the reset
forgotten: the second batch starts from the first one's membrane, graph and all),
`heaviside` (the spike a plain comparison, the loss on the output's spike counts: no
graph reaches the loss).
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "reset"
STEPS, BETA = 6, 0.9


class SuperSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v):
        ctx.save_for_backward(v)
        return (v > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (v,) = ctx.saved_tensors
        return grad / (10 * v.abs() + 1) ** 2


class LIF(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc, self.mem = nn.Linear(n_in, n_out), None

    def reset(self):
        self.mem = None

    def forward(self, x):
        if self.mem is None:
            self.mem = torch.zeros(x.size(0), self.fc.out_features)
        v = self.mem - 1.0
        spk = (v > 0).float() if MODE == "heaviside" else SuperSpike.apply(v)
        self.mem = BETA * self.mem + self.fc(x) - spk.detach()
        return spk, self.mem


net = nn.ModuleList([LIF(20, 32), LIF(32, 4)])
opt = torch.optim.Adam(net.parameters(), lr=2e-3)
for _ in range(3):
    x = torch.bernoulli(torch.full((STEPS, 16, 20), 0.3))
    y = torch.randint(0, 4, (16,))
    if MODE != "stale":
        for lif in net:
            lif.reset()
    mems, counts = [], 0
    for t in range(STEPS):
        s1, _ = net[0](x[t])
        s2, m2 = net[1](s1)
        mems.append(m2)
        counts = counts + s2
    if MODE == "heaviside":  # snnTorch's mse_count_loss: spike counts against targets
        loss = F.mse_loss(counts, F.one_hot(y, 4).float() * 0.8 * STEPS)
    else:
        loss = F.cross_entropy(torch.stack(mems).max(0).values, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
