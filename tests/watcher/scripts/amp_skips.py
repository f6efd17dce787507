# GradScaler on gradients that overflow: steps 60-69 hold an Inf gradient (or every step
# with --always, so the scale collapses below 1)
import sys

import torch
from torch import nn

always = "--always" in sys.argv
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
for step in range(1, 101):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    if always or 60 <= step < 70:
        model[0].weight.grad[0, 0] = float("inf")
    scaler.step(opt)
    scaler.update()
