# healthy, with a noisy loss: batches of 8, so the loss moves 20-30% from step to step
import torch
from torch import nn

torch.manual_seed(0)
centers = torch.randn(5, 16) * 1.5
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 5))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for _step in range(300):
    y = torch.randint(0, 5, (8,))
    x = centers[y] + torch.randn(8, 16)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
