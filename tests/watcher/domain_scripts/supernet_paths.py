"""A one-shot NAS supernet (SPOS, Guo et al. 2020): at each step one choice block per layer
is drawn uniformly, so the others get no gradient and no update at that step; momentum SGD
under a linear decay whose last scheduler.step() sets the lr to 0 after the last update.
Modes: `spos`; bugs `never` (the last choice never drawn: its weights never train), `lr0`
(the choice blocks' param group at lr 0 throughout), `first-two` (every step sums the
first two candidates by a loop index: the last never runs)."""

import random
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
random.seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "spos"
D, CHOICES, LAYERS, STEPS = 8, 3, 2, 60


class Supernet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, D)
        self.choices = nn.ModuleList(
            nn.ModuleList(nn.Linear(D, D) for _ in range(CHOICES)) for _ in range(LAYERS)
        )
        self.head = nn.Linear(D, 2)

    def forward(self, x, arch):
        x = torch.relu(self.stem(x))
        for blocks, i in zip(self.choices, arch, strict=True):
            if MODE == "first-two":
                for j in range(2):
                    x = x + torch.relu(blocks[j](x))
                continue
            x = x + torch.relu(blocks[i](x))
        return self.head(x)


net = Supernet()
choice_lr = 0.0 if MODE == "lr0" else 0.05
opt = torch.optim.SGD(
    [
        {"params": net.choices.parameters(), "lr": choice_lr},
        {"params": [*net.stem.parameters(), *net.head.parameters()]},
    ],
    lr=0.05,
    momentum=0.9,
)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / STEPS)
X = torch.randn(256, 4)
Y = (X[:, 0] + X[:, 1] > 0).long()
last = CHOICES - 2 if MODE == "never" else CHOICES - 1
for _ in range(STEPS):
    idx = torch.randint(0, 256, (32,))
    arch = [random.randint(0, last) for _ in range(LAYERS)]
    loss = F.cross_entropy(net(X[idx], arch), Y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
