# one outlier batch (inputs ×40) at step 150 of an otherwise calm regression
import torch
from torch import nn

torch.manual_seed(0)
w = torch.randn(8, 1)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(1, 201):
    x = torch.randn(32, 8)
    y = x @ w + 0.1 * torch.randn(32, 1)
    if step == 150:
        x = x * 40
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
