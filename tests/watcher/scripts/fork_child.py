# forks after the hooks are installed: the child trains 3 steps and runs on to the end of
# the script, as a plain `python` child would; the parent waits, then trains 5 steps
import os
import sys

import torch
from torch import nn


def train(steps: int) -> None:
    torch.manual_seed(os.getpid() % 7)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


pid = os.fork()
if pid == 0:
    train(3)
    print("child done", file=sys.stderr)
else:
    _, status = os.waitpid(pid, 0)
    train(5)
    print(f"parent saw child exit {os.waitstatus_to_exitcode(status)}", file=sys.stderr)
