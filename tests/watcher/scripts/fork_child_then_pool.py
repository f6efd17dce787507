# two kinds of forked children, one after the other, in one launch:
# - after 12 steps a plain fork: the child trains 12 steps of its own and raises, running
#   on to the end of the script as a plain `python` child would (so never to the Pool);
#   the parent waits and says its exit code
# - then a multiprocessing.Pool forked after the hooks are installed: its workers train
#   steps of their own (one raises inside its step) and the Pool ends them with SIGTERM at
#   exit; the parent trains 20 steps more first and prints what it got back
# the parent's own steps: 12 + 20
import multiprocessing as mp
import os
import sys
import traceback

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def steps_of_the_model(steps: int) -> None:
    for _ in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def train(steps: int) -> int:
    """A Pool worker's own model and steps; 13 steps raise at the last."""
    mine = nn.Linear(4, 1)
    sgd = torch.optim.SGD(mine.parameters(), lr=0.01)
    for step in range(steps):
        loss = mine(torch.randn(8, 4)).pow(2).mean()
        if steps == 13 and step == 12:
            raise ValueError("bad batch in a worker")
        sgd.zero_grad()
        loss.backward()
        sgd.step()
    return steps


if __name__ == "__main__":
    steps_of_the_model(12)
    pid = os.fork()
    if pid == 0:
        steps_of_the_model(12)
        raise ValueError("the child failed")
    _, status = os.waitpid(pid, 0)
    print(f"child exit {os.waitstatus_to_exitcode(status)}", file=sys.stderr)

    steps_of_the_model(20)
    with mp.get_context("fork").Pool(2) as pool:
        print("pool:", pool.map(train, [12, 12, 15]), file=sys.stderr)
    with mp.get_context("fork").Pool(2) as pool:
        try:
            pool.map(train, [13])
        except ValueError:
            print("caught:", traceback.format_exc(), file=sys.stderr)
