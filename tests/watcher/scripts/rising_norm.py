# SGD with momentum under schedules whose lr rises for a while (OneCycle's ramp, a linear
# warm-up to a high peak): the gradient norm rises with it to a level it holds while the
# loss falls. Healthy. `bad_batch`: the OneCycle run with one corrupted batch (inputs ×30)
# at step 70, whose norm comes back: a spike.
# ARGS: KIND(onecycle|warmup|bad_batch) [STEPS]
import sys

import torch
import torch.nn.functional as F
from torch import nn

kind = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 150
torch.manual_seed(0)
w = torch.randn(20, 5)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
if kind == "warmup":
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 60) * 4)
else:
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.2, total_steps=400)
for step in range(1, steps + 1):
    x = torch.randn(64, 20)
    y = (x @ w + 0.3 * torch.randn(64, 5)).argmax(1)
    if kind == "bad_batch" and step == 70:
        x = x * 30
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
