"""DDP with gradient accumulation (no_sync), each rank its own data: rank 1's targets
are shifted, so the two ranks' local gradients differ. Rank 0 writes, per step, what the
noise scale should see: k·Σ|h_i|² of its own micro-batch gradients (taken by autograd.grad
on the inner module, outside DDP), |G|² of the averaged gradient, |Σ h_i|² of its own
(what `.grad` would hold without the other rank) and its distance to the average."""

import argparse
import contextlib
import json

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--micro", type=int, default=2)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    params = list(model.module.parameters())
    gen = torch.Generator().manual_seed(100 + rank)
    k, seen = args.micro, []
    for _ in range(args.steps):
        own, local = 0.0, [torch.zeros_like(p, dtype=torch.float64) for p in params]
        for i in range(k):
            x = torch.randn(8, 6, generator=gen)
            y = x.sum(1, keepdim=True) + 2.0 * rank + 0.3 * torch.randn(8, 1, generator=gen)
            ref = torch.autograd.grad(nn.functional.mse_loss(model.module(x), y) / k, params)
            own += sum(float(g.double().square().sum()) for g in ref)
            local = [a + g.double() for a, g in zip(local, ref, strict=True)]
            sync = contextlib.nullcontext() if i == k - 1 else model.no_sync()
            with sync:
                (nn.functional.mse_loss(model(x), y) / k).backward()
        reduced = sum(float(p.grad.double().square().sum()) for p in params)
        local_sq = sum(float(a.square().sum()) for a in local)
        apart = sum(
            float((p.grad.double() - a).square().sum()) for p, a in zip(params, local, strict=True)
        )
        seen.append({"micro_sq": k * own, "grad_sq": reduced, "local_sq": local_sq, "apart": apart})
        opt.step()
        opt.zero_grad()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump(seen, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
