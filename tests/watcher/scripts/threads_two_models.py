# two threads, each training its own model with its own optimizer, at the same time;
# argv[3] zero-first: each zeroes its gradients before the forward instead of after step
import json
import sys
import threading
import time

import torch
from torch import nn

STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 150
ZERO_FIRST = len(sys.argv) > 3 and sys.argv[3] == "zero-first"  # zero_grad before forward
torch.manual_seed(0)
record: list[dict] = []
lock = threading.Lock()
start = threading.Barrier(2)


def train(kind: str, seed: int, model: nn.Module) -> None:
    gen = torch.Generator().manual_seed(seed)  # the same batches whatever the timing
    if kind == "SGD":
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start.wait()
    for _ in range(STEPS):
        x = torch.randn(16, 12, generator=gen)
        y = torch.randint(0, 3, (16,), generator=gen)
        if ZERO_FIRST:
            opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if not ZERO_FIRST:
            opt.zero_grad()
        with lock:
            record.append({"optimizer": kind, "loss": loss.item(), "calls": 1})
        time.sleep(0)  # yield the GIL: the two threads' steps interleave, even under load


models = [nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 3)) for _ in range(2)]
threads = [
    threading.Thread(target=train, args=(k, s, m))
    for (k, s), m in zip((("SGD", 1), ("Adam", 2)), models, strict=True)
]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(sys.argv[1], "w") as f:
    json.dump({"steps": record}, f)
