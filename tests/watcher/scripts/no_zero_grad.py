# zero_grad() forgotten: .grad accumulates across optimizer steps
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.001)
for _step in range(60):
    x = torch.randn(16, 8)
    loss = nn.functional.mse_loss(model(x), x[:, :1])
    loss.backward()
    opt.step()
