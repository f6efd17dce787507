"""A plain DDP training loop (gloo on CPU), with one optional bug per --bug.

    torchrun --standalone --nproc_per_node=2 -m gradscope.distributed \\
        gradscope/examples/ddp_train.py -- --bug unused

Bugs: unused (a module that never runs), rank-branch (a module only rank 1 runs),
dropped-output (an output left out of the loss), detached (a module's output cut
by .detach()), reentrant (one layer checkpointed twice with use_reentrant=True),
perturb (rank 1 nudges one weight element after step 3), skip (rank 1 skips an
optimizer step), none (healthy).
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self, bug: str):
        super().__init__()
        self.bug = bug
        self.embed = nn.Linear(8, 16)
        self.norm = nn.BatchNorm1d(16)
        self.block = nn.Linear(16, 16)
        self.aux = nn.Linear(16, 4)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = torch.relu(self.norm(self.embed(x)))
        if self.bug == "detached":
            h = self.block(h).detach()
        elif self.bug == "reentrant":
            h = checkpoint(self.block, h, use_reentrant=True)
            h = checkpoint(self.block, h, use_reentrant=True)
        elif self.bug == "rank-branch" and dist.get_rank() == 1:
            h = self.block(h) + h
        elif self.bug != "rank-branch":
            h = self.block(h)
        out = self.head(h)
        if self.bug == "unused":
            return out
        aux = self.aux(h)
        return out, aux


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bug", default="none")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--find-unused", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Net(args.bug), find_unused_parameters=args.find_unused)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data shard
    for step in range(args.steps):
        x, y = torch.randn(16, 8, generator=gen), torch.randn(16, 1, generator=gen)
        result = model(x)
        out, aux = result if isinstance(result, tuple) else (result, None)
        loss = nn.functional.mse_loss(out, y)
        if aux is not None and args.bug != "dropped-output":
            loss = loss + 0.1 * aux.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        if args.bug == "skip" and rank == 1 and step == 2:
            continue
        opt.step()
        if args.bug == "perturb" and rank == 1 and step == 3:
            with torch.no_grad():
                model.module.block.weight[0, 0] += 1e-3
    print(f"rank {rank} done, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
