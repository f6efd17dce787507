"""Gradient accumulation as Lightning's automatic optimization runs it
(`accumulate_grad_batches=4`): the first three micro-batches' backward outside the step,
the last one inside the closure given to `optimizer.step`, each on its loss divided by 4.
The head starts at zero, so every micro-batch's first cross-entropy is ln 4 exactly and
the first step's loss (their sum) is ln 4. Modes: `closure`; `plain` (every micro-batch
outside the step, no closure)."""

import sys

import torch
from torch import nn

torch.manual_seed(0)
MODE = sys.argv[1] if len(sys.argv) > 1 else "closure"
ACCUMULATE = 4
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
nn.init.zeros_(model[2].weight)
nn.init.zeros_(model[2].bias)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
w = torch.randn(8, 4)


def micro_loss() -> torch.Tensor:
    x = torch.randn(16, 8)
    loss = nn.functional.cross_entropy(model(x), (x @ w).argmax(1))
    return loss / ACCUMULATE


for _ in range(6):
    for _micro in range(ACCUMULATE - 1):
        micro_loss().backward()
    if MODE == "closure":

        def closure() -> torch.Tensor:
            loss = micro_loss()
            loss.backward()
            return loss

        opt.step(closure)
    else:
        micro_loss().backward()
        opt.step()
    opt.zero_grad()
