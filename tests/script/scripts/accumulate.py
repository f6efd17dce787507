"""Gradient accumulation (2 backward per optimizer step) with a GradScaler whose first step
is skipped (its gradients overflow); logs every backward and step to events.log."""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
accumulation = 2
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(12)]
batches[0] = (batches[0][0] * 2e17, batches[0][1])  # step 1 overflows: the scaler skips it


def log(line):
    with open("events.log", "a") as f:
        f.write(line + "\n")


for i, (x, y) in enumerate(batches):
    loss = F.mse_loss(model(x), y) / accumulation
    log(f"backward {i} {loss.item()!r}")
    scaler.scale(loss).backward()
    if (i + 1) % accumulation == 0:
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        log(f"step {(i + 1) // accumulation} scale {scaler.get_scale()}")
