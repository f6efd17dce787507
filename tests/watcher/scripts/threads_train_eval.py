# a training thread steps while the main thread evaluates the same model (forward only)
import json
import sys
import threading

import torch
from torch import nn

STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 200
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
losses: list[float] = []


def train() -> None:
    gen = torch.Generator().manual_seed(1)  # the same batches whatever the threads' timing
    for _ in range(STEPS):
        x = torch.randn(32, 16, generator=gen)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        opt.step()
        losses.append(loss.item())


worker = threading.Thread(target=train, name="trainer")
worker.start()
evals = 0
held_out = torch.randn(64, 16, generator=torch.Generator().manual_seed(2))
while worker.is_alive():
    with torch.no_grad():
        model(held_out).mean().item()
    evals += 1
worker.join()
with open(sys.argv[1], "w") as f:
    json.dump({"steps": [{"optimizer": "Adam", "loss": v, "calls": 1} for v in losses]}, f)
