# healthy, with an evaluation every 10 steps: model.eval() and a no_grad forward between steps
import torch
from torch import nn

torch.manual_seed(0)
w = torch.randn(16, 1)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 1))
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
x_val = torch.randn(256, 16)
y_val = x_val @ w
for step in range(1, 301):
    x = torch.randn(32, 16)
    loss = nn.functional.mse_loss(model(x), x @ w + 0.1 * torch.randn(32, 1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        model.eval()
        with torch.no_grad():
            val = nn.functional.mse_loss(model(x_val), y_val)
        model.train()
