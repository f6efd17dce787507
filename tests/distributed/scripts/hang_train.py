"""A plain DDP training loop (gloo on CPU) that never finishes, one way per --bug.

    torchrun --standalone --nproc_per_node=2 -m gradscope watch hang_train.py \\
        --hang-timeout 5 -- --bug extra-collective

Bugs, each after step --at (0: before the first step):
  extra-collective: rank 1 issues one all_reduce the other ranks never issue;
  rank-barrier: only rank 0 waits in a barrier;
  dead-rank: rank 1 stops answering without closing its connections (stuck in native
      code that holds the GIL, as a wedged extension or a frozen host would);
  slow-step: rank 0 computes for --slow seconds in one step (no bug: the others wait);
  none: healthy.
"""

import argparse
import ctypes
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def busy(seconds):
    """Work the CPU for `seconds`, as a slow data loader or a long eval would."""
    end = time.monotonic() + seconds
    x = torch.randn(64, 64)
    while time.monotonic() < end:
        x = torch.tanh(x @ x.T / 64)


def bug(name, rank, slow):
    if name == "extra-collective" and rank == 1:
        dist.all_reduce(torch.ones(1))
    elif name == "rank-barrier" and rank == 0:
        dist.barrier()
    elif name == "dead-rank" and rank == 1:
        ctypes.PyDLL(None).sleep(3600)
    elif name == "slow-step" and rank == 0:
        busy(slow)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bug", default="none")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--at", type=int, default=3)
    ap.add_argument("--slow", type=float, default=0.0)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)
    if args.at == 0:
        bug(args.bug, rank, args.slow)
    for step in range(1, args.steps + 1):
        x, y = torch.randn(16, 8, generator=gen), torch.randn(16, 1, generator=gen)
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == args.at:
            bug(args.bug, rank, args.slow)
    print(f"rank {rank} done, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
