# a data bug: one corrupted batch holds a NaN at step 40 (the script does not check)
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(1, 61):
    x, y = torch.randn(16, 8), torch.randn(16, 1)
    if step == 40:
        x[3, 2] = float("nan")
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
