# a multiprocessing.Pool forked after the hooks are installed: its workers train steps of
# their own (one raises inside its step) and the Pool ends them with SIGTERM at exit; the
# parent trains 20 steps and prints what it got back
import multiprocessing as mp
import sys
import traceback

import torch
from torch import nn


def train(steps: int) -> int:
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        if steps == 13 and step == 12:
            raise ValueError("bad batch in a worker")
        opt.zero_grad()
        loss.backward()
        opt.step()
    return steps


if __name__ == "__main__":
    train(20)
    with mp.get_context("fork").Pool(2) as pool:
        print("pool:", pool.map(train, [12, 12, 15]), file=sys.stderr)
    with mp.get_context("fork").Pool(2) as pool:
        try:
            pool.map(train, [13])
        except ValueError:
            print("caught:", traceback.format_exc(), file=sys.stderr)
