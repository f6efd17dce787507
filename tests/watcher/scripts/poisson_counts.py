# Count regression with PoissonNLLLoss(log_input=True), healthy: counts exp(2 + x.w) are
# heavy-tailed, so a batch with a large one scales every layer's gradient 60-75x at once
# (step 167), within the total norm's own history; the loss is negative for large counts.
import torch
from torch import nn

torch.manual_seed(0)
D = 8
w = torch.randn(D) * 0.5
net = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(net.parameters(), lr=3e-3)
crit = nn.PoissonNLLLoss(log_input=True)
for _ in range(300):
    x = torch.randn(128, D)
    y = torch.poisson(torch.exp(2 + x @ w)).unsqueeze(1)
    loss = crit(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
