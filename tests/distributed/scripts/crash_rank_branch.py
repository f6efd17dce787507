"""DDP (gloo) where only rank 0 runs `cls_head`: rank 1's DDP raises its reduction error
at the second forward, while rank 0 waits in the all-reduce rank 1 never joins (it
fails only when rank 1's connection closes, with no explanation of its own).

`late`: no branch; rank 1 raises after the last step, rank 0's script ends normally."""

import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.reg_head = nn.Linear(16, 1)
        self.cls_head = nn.Linear(16, 1)

    def forward(self, x):
        h = torch.relu(self.body(x))
        out = self.reg_head(h)
        if LATE or dist.get_rank() == 0:  # the bug: a rank-dependent branch
            out = out + self.cls_head(h)
        return out


LATE = sys.argv[1:] == ["late"]
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(Net())
opt = torch.optim.SGD(model.parameters(), lr=0.05)
gen = torch.Generator().manual_seed(dist.get_rank())
for _ in range(4):
    loss = model(torch.randn(16, 8, generator=gen)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
if LATE and dist.get_rank() == 1:
    raise ValueError("rank 1 fails after its last step")
dist.destroy_process_group()
