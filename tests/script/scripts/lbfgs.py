"""An optimizer that takes a closure: the backward runs inside optimizer.step(closure)."""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=2)
x, y = torch.randn(16, 3), torch.randn(16, 1)
calls = 0


def closure():
    global calls
    calls += 1
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    with open("events.log", "a") as f:
        f.write(f"closure {calls} {loss.item()!r}\n")
    loss.backward()  # CLOSURE-BACKWARD
    return loss


for _step in range(4):
    optimizer.step(closure)
