# plain SGD with a learning rate just above the stable limit: the norm grows steadily
import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(256, 16)
y = x @ torch.randn(16, 1)
model = nn.Linear(16, 1)
lam = torch.linalg.eigvalsh(2 * x.T @ x / len(x)).max().item()
opt = torch.optim.SGD(model.parameters(), lr=2.1 / lam)
for _step in range(120):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
