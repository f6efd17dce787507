# a plain loop that writes what it saw (loss, clip_grad_norm_'s return) to argv[1]
import json
import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
seen = []
for step in range(40):
    x, y = torch.randn(16, 8), torch.randint(0, 3, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    seen.append({"loss": loss.item(), "norm": norm.item()})
    print(f"step {step} loss {loss.item():.4f}")
with open(sys.argv[1], "w") as f:
    json.dump(seen, f)
