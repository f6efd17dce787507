# a too-hot first step kills every ReLU of the first layer: its gradient dies, the loss stays
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(1, 201):
    x = torch.randn(64, 10)
    y = x.sum(dim=1, keepdim=True) + 5.0
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    if step == 20:
        model[0].bias.grad += 1e4  # a bad batch's gradient lands on the biases
    opt.step()
