# GradScaler with clip_grad_norm_ before scaler.unscale_: max_norm 1.0 is compared with
# gradients still multiplied by the scale (2**16); --unscale does it right
import sys

import torch
from torch import nn

right = "--unscale" in sys.argv
torch.manual_seed(0)
w = torch.randn(8, 1)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16, growth_interval=10**6)
for _step in range(100):
    x = torch.randn(32, 8)
    loss = nn.functional.mse_loss(model(x), x @ w)
    opt.zero_grad()
    scaler.scale(loss).backward()
    if right:
        scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
