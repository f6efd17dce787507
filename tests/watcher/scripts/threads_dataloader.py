# a DataLoader with worker processes feeds an ordinary loop
import json
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(512, 10)
data = TensorDataset(x, x.sum(1, keepdim=True))
loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
record: list[dict] = []
for _epoch in range(2):
    for xb, yb in loader:
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
        record.append({"optimizer": "SGD", "loss": loss.item(), "calls": 1})
with open(sys.argv[1], "w") as f:
    json.dump({"steps": record}, f)
