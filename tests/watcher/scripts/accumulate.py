# deliberate gradient accumulation: 4 micro-batches per step, gradients reset after it
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for _step in range(80):
    for _micro in range(4):
        x = torch.randn(8, 8)
        loss = nn.functional.mse_loss(model(x), x[:, :1]) / 4
        loss.backward()
    opt.step()
    opt.zero_grad()
