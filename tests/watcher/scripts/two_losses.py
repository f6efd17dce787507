"""A step whose loss is two backward calls: a cross-entropy, then an entropy bonus (or, with
"twice", the same cross-entropy again: two micro-batches of one loss)."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
net = nn.Linear(8, 4)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randint(0, 4, (64,))
for _step in range(30):
    opt.zero_grad()
    logits = net(x)
    nn.functional.cross_entropy(logits, y).backward(retain_graph=True)
    if "twice" in sys.argv:
        nn.functional.cross_entropy(net(x), y).backward()
    else:
        (-2.0 * torch.distributions.Categorical(logits=logits).entropy().mean()).backward()
    opt.step()
