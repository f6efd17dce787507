"""A plain FSDP2 loop (gloo, CPU) that also writes the unsharded reference gradient norms.

    torchrun --standalone --nproc_per_node=2 -m gradscope watch \\
        fsdp_reference_train.py -- --reference ref.json

Rank 0 writes, per step, each parameter's gradient L2 norm computed on an unsharded
copy of the model fed the whole global batch, and the norms of each full parameter's
update and of its new value: what correct sharded norms and ratios must equal.
"""

import argparse
import json

import torch
import torch.distributed as dist
from torch import nn

from gradscope.distributed import context, norms
from gradscope.examples.fsdp_train import sharded_pair


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--clip", type=float, default=None, help="clip_grad_norm_ to this norm")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    model, reference = sharded_pair(world)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(7)
    steps = []
    for _ in range(args.steps):
        full_x = torch.randn(4 * world, 8, generator=gen)
        full_y = torch.randn(4 * world, 1, generator=gen)
        x, y = full_x[rank * 4 : rank * 4 + 4], full_y[rank * 4 : rank * 4 + 4]
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        reference.zero_grad()
        nn.functional.mse_loss(reference(full_x), full_y).backward()
        steps.append({n: float(p.grad.double().norm()) for n, p in reference.named_parameters()})
        # gradscope's library call (all ranks), checked against the same reference
        grads = [p.grad for p in model.parameters()]
        library = norms.global_grad_norms(
            grads, context.current(), [norms.is_sharded(p) for p in model.parameters()]
        )
        steps[-1]["library"] = [*library.per_param, library.total, library.clip_coefficient(0.5)]
        if args.clip is not None:
            total = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            steps[-1]["total"] = float(total.full_tensor())
        opt.step()
        updates, weights = {}, {}
        with torch.no_grad():  # the reference follows the same update
            for (name, q), p in zip(reference.named_parameters(), model.parameters(), strict=True):
                new = p.full_tensor()
                updates[name] = float((q - new).double().norm())  # float32 difference
                weights[name] = float(new.double().norm())
                q.copy_(new)
        steps[-1].update(updates=updates, weights=weights)
    if rank == 0:
        with open(args.reference, "w") as f:
            json.dump(steps, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
