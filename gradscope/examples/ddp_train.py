"""A plain DDP training loop (gloo on CPU), with optional bugs (--bug a,b: several at once).

    torchrun --standalone --nproc_per_node=2 -m gradscope watch \\
        gradscope/examples/ddp_train.py -- --bug unused

Bugs that make DDP raise its reduction error (unless --find-unused): unused (a module
that never runs), rank-branch (a module only rank 1 runs), dropped-output (an output
left out of the loss), detached (a module's output cut by .detach()); reentrant (one
layer checkpointed twice with use_reentrant=True: DDP raises "marked ready twice").
Bugs that let the run go on: perturb (rank 1 nudges one weight element after step 3),
skip (rank 1 skips its third optimizer step), bad-shard (rank 1's data shard has its
targets in other units, x100, as a broken preprocessing step would leave them).
none: healthy.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

DYING = ("unused", "rank-branch", "dropped-output", "detached", "reentrant")
BUGS = ("none", *DYING, "perturb", "skip", "bad-shard")


class Net(nn.Module):
    def __init__(self, bugs: frozenset):
        super().__init__()
        self.bugs = bugs
        self.embed = nn.Linear(8, 16)
        self.norm = nn.BatchNorm1d(16)
        self.block = nn.Linear(16, 16)
        self.aux = nn.Linear(16, 4)
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = torch.relu(self.norm(self.embed(x)))
        if "detached" in self.bugs:
            h = self.block(h).detach()
        elif "reentrant" in self.bugs:
            h = checkpoint(self.block, h, use_reentrant=True)
            h = checkpoint(self.block, h, use_reentrant=True)
        elif "rank-branch" in self.bugs:
            if dist.get_rank() == 1:
                h = self.block(h) + h
        else:
            h = self.block(h)
        out = self.head(h)
        if "unused" in self.bugs:
            return out
        aux = self.aux(h)
        return out, aux


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bug", default="none", help="comma-separated: " + ", ".join(BUGS))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--find-unused", action="store_true")
    args = ap.parse_args()
    bugs = frozenset(args.bug.split(","))
    if not bugs <= set(BUGS):
        ap.error(f"unknown --bug {', '.join(sorted(bugs - set(BUGS)))}")
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(Net(bugs), find_unused_parameters=args.find_unused)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data shard
    for step in range(args.steps):
        x, y = torch.randn(16, 8, generator=gen), torch.randn(16, 1, generator=gen)
        if "bad-shard" in bugs and rank == 1:
            y = y * 100.0
        result = model(x)
        out, aux = result if isinstance(result, tuple) else (result, None)
        loss = nn.functional.mse_loss(out, y)
        if aux is not None and "dropped-output" not in bugs:
            loss = loss + 0.1 * aux.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # healthy norms stay below 2
        if "skip" in bugs and rank == 1 and step == 2:
            continue
        opt.step()
        if "perturb" in bugs and rank == 1 and step == 3:
            with torch.no_grad():
                model.module.block.weight[0, 0] += 1e-3
    print(f"rank {rank} done, loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
