# forks after 12 steps; the child trains 12 steps of its own and raises, running on to the
# end of the script as a plain `python` child would; the parent waits and says its exit code
import os
import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def train(steps: int) -> None:
    for _ in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


train(12)
pid = os.fork()
if pid == 0:
    train(12)
    raise ValueError("the child failed")
_, status = os.waitpid(pid, 0)
print(f"child exit {os.waitstatus_to_exitcode(status)}", file=sys.stderr)
