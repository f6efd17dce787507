# backward-only iterations before the first optimizer step, then a few ordinary steps.
# Writes the loss and backward calls of each step as the script sees them to argv[1].
# Cases (argv[2]): warmup (zero_grad between the warm-up passes, the optimizer created
# after them), no_reset (no reset at all until the optimizer's loop zeroes them),
# by_hand (warm-up gradients set to None by hand), early_optimizer (the optimizer exists
# before the warm-up), across (two micro-batches before the optimizer is created and two
# after, their gradients accumulated into its first step).
import json
import sys

import torch
from torch import nn

out, case = sys.argv[1], sys.argv[2]
warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))
x, y = torch.randn(32, 6), torch.randn(32, 1)
steps: list[dict] = []


def loss_of(scale: float = 1.0) -> torch.Tensor:
    return nn.functional.mse_loss(model(x), y) * scale


opt = torch.optim.SGD(model.parameters(), lr=0.05) if case == "early_optimizer" else None
for _ in range(warmup):
    loss_of().backward()
    if case in ("warmup", "across"):
        model.zero_grad()
    elif case == "by_hand":
        for p in model.parameters():
            p.grad = None
    elif case == "early_optimizer":
        opt.zero_grad()
pending: list[float] = []
if case == "across":
    for _ in range(2):
        loss = loss_of(0.25)
        loss.backward()
        pending.append(loss.item())
if opt is None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
for _step in range(5):
    micro = 4 if case == "across" else 1
    if case != "across":
        opt.zero_grad()
    while len(pending) < micro:
        loss = loss_of(1 / micro)
        loss.backward()
        pending.append(loss.item())
    opt.step()
    if case == "across":
        opt.zero_grad()
    steps.append({"optimizer": "SGD", "loss": sum(pending), "calls": len(pending)})
    pending = []
with open(out, "w") as f:
    json.dump({"steps": steps}, f)
