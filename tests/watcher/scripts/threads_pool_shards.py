# a thread pool computes the backward of each shard of the batch; the main thread steps
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import torch
from torch import nn

STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 60
SHARDS = 4
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
record: list[dict] = []


def shard_backward(xy: tuple[torch.Tensor, torch.Tensor]) -> float:
    x, y = xy
    loss = nn.functional.mse_loss(model(x), y) / SHARDS
    loss.backward()
    return loss.item()


with ThreadPoolExecutor(max_workers=SHARDS) as pool:
    for _ in range(STEPS):
        x = torch.randn(64, 20)
        y = x[:, :1] * 2 - x[:, 1:2]
        opt.zero_grad()
        shard_losses = list(
            pool.map(shard_backward, zip(x.chunk(SHARDS), y.chunk(SHARDS), strict=True))
        )
        opt.step()
        record.append({"optimizer": "SGD", "loss": sum(shard_losses), "calls": SHARDS})
with open(sys.argv[1], "w") as f:
    json.dump({"steps": record}, f)
