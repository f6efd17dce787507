# NaN made in the backward of a finite loss: a training loop whose objective has
#   sqrt     pairwise distances with each row against itself: sqrt(0)
#   acos     the angle of a saturated tanh: acos(±1)
#   log      torch.where(mask, torch.log(p), 0) with p == 0 where the mask drops it
#   pow      (v * mask) ** 0.5 * mask: the root of values a mask zeroed, masked again
#   safe-sqrt, safe-acos, safe-log, safe-pow: the same objectives made safe (look-alikes)
# argv: KIND MODE STEPS, MODE `sgd` (the update writes the NaN into the weights) or
# `scaler` (GradScaler skips every step: the weights stay finite), `search` and
# `search-long` (GradScaler starting at 2**120 and 2**127: a healthy model's scaled gradients
# overflow at first, 3 and 10 skips with safe-sqrt, until the scale search ends)
import sys
import time

import torch
from torch import nn

kind, mode, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])


def objective(out: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    safe = kind.startswith("safe-")
    name = kind.removeprefix("safe-")
    if name == "sqrt":
        d = ((out[:, None] - out[None]) ** 2).sum(-1)
        return torch.sqrt(d + 1e-12 if safe else d).mean()  # BUG: sqrt
    if name == "acos":
        if safe:  # kept off ±1
            return torch.acos(torch.tanh(out).clamp(-1 + 1e-6, 1 - 1e-6)).mean()
        return torch.acos(torch.tanh(out * 1e4)).mean()  # BUG: acos
    if name == "log":
        p = torch.sigmoid(out) * mask
        inside = torch.where(mask > 0, p, 1.0) if safe else p
        return -torch.where(mask > 0, torch.log(inside), 0.0).mean()  # BUG: log
    v = out.pow(2) + 1.0
    return ((v * mask + (1 - mask) if safe else v * mask) ** 0.5 * mask).mean()  # BUG: pow


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
INIT = {"scaler": 2.0**16, "search": 2.0**120, "search-long": 2.0**127}
scaler = torch.amp.GradScaler("cpu", init_scale=INIT[mode]) if mode in INIT else None
for _step in range(steps):
    x = torch.randn(16, 4)
    mask = (torch.rand(16, 4) > 0.3).float()
    opt.zero_grad()
    loss = objective(model(x), mask)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()
    time.sleep(0.006)  # a step of real work: the watch reads its records back as it runs
