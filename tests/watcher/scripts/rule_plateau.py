# healthy, plateaus late: the learnable part is learned in ~80 steps, label noise remains
import torch
from torch import nn

torch.manual_seed(0)
w = torch.randn(8, 1)
model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for _step in range(400):
    x = torch.randn(64, 8)
    y = x @ w + 0.5 * torch.randn(64, 1)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
