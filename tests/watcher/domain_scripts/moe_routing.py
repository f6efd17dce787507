"""A Switch-style mixture of experts (top-1 router, load-balancing loss): an expert that
gets no token in a step has no gradient in that step, by design. Modes: `switch` (healthy);
`dead` (from step 16 the inputs leave expert 3's region: the router never picks it again,
a dead expert); `branches` (a look-alike with no router: four parallel branches summed,
the last left out of the sum from step 16, a branch the loss stopped using); bug
`router-detached` (the gate's logits detached: the router never learns)."""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "switch"
D, E, STEPS = 6, 4, 40


def expert() -> nn.Module:
    return nn.Sequential(nn.Linear(D, 12), nn.ReLU(), nn.Linear(12, D))


class SwitchLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(D, E, bias=False)
        self.experts = nn.ModuleList(expert() for _ in range(E))
        with torch.no_grad():
            self.gate.weight.copy_(4 * torch.eye(E, D))  # expert e reads feature e

    def forward(self, x):
        logits = self.gate(x)
        if MODE == "router-detached":
            logits = logits.detach()
        probs = logits.softmax(-1)
        weight, chosen = probs.max(-1)
        out = torch.zeros_like(x)
        for e, ex in enumerate(self.experts):
            tokens = (chosen == e).nonzero().squeeze(-1)
            if len(tokens):
                out[tokens] = ex(x[tokens]) * weight[tokens, None]
        fraction = F.one_hot(chosen, E).float().mean(0)
        self.aux = E * (fraction * probs.mean(0)).sum()
        return x + out


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.branches = nn.ModuleList(expert() for _ in range(E))
        self.used = E

    def forward(self, x):
        self.aux = torch.zeros(())
        return x + sum(b(x) for b in self.branches[: self.used])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.moe = Branches() if MODE == "branches" else SwitchLayer()
        self.head = nn.Linear(D, 1)

    def forward(self, x):
        return self.head(self.moe(x))


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(1, STEPS + 1):
    x = torch.randn(16, D)
    if step > 15 and MODE == "dead":
        x[:, 3] -= 10.0
    if step > 15 and MODE == "branches":
        model.moe.used = E - 1
    loss = F.mse_loss(model(x), x.sum(1, keepdim=True)) + 0.01 * model.moe.aux
    opt.zero_grad()
    loss.backward()
    opt.step()
