"""A plain FSDP2 (`fully_shard`) training loop on CPU (gloo), healthy.

    torchrun --standalone --nproc_per_node=2 -m gradscope.distributed \\
        gradscope/examples/fsdp_train.py

With --check-norms each rank compares gradscope's sharded gradient norms and
clip coefficient with an unsharded reference and prints the largest relative error.
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def build():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 33), nn.Tanh(), nn.Linear(33, 17), nn.Tanh(), nn.Linear(17, 1)
    )


def sharded_pair(world: int):
    """The model sharded over a CPU mesh of `world` ranks, and an identical unsharded copy."""
    mesh = init_device_mesh("cpu", (world,))
    model, reference = build(), build()
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, reference


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--check-norms", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    model, reference = sharded_pair(world)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(7)
    for _ in range(args.steps):
        full_x, full_y = (
            torch.randn(4 * world, 8, generator=gen),
            torch.randn(4 * world, 1, generator=gen),
        )
        x, y = full_x[rank * 4 : rank * 4 + 4], full_y[rank * 4 : rank * 4 + 4]
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        if args.check_norms:
            check_norms(model, reference, full_x, full_y)
        opt.step()
        with torch.no_grad():  # the reference follows the same update
            for p, q in zip(model.parameters(), reference.parameters(), strict=True):
                q.copy_(p.full_tensor())
    dist.destroy_process_group()


def check_norms(model, reference, x, y):
    from gradscope.distributed import context, norms

    reference.zero_grad()
    nn.functional.mse_loss(reference(x), y).backward()
    grads = [p.grad for p in model.parameters()]
    got = norms.global_grad_norms(
        grads, context.current(), [norms.is_sharded(p) for p in model.parameters()]
    )
    want = [float(p.grad.double().norm()) for p in reference.parameters()]
    total = float(torch.stack([p.grad.double().norm() for p in reference.parameters()]).norm())
    naive = float(torch.stack([g.to_local().double().norm() for g in grads]).norm())
    err = max(abs(a - b) / b for a, b in zip(got.per_param, want, strict=True))
    clip_want = min(1.0, 0.1 / (total + 1e-6))
    total_err = abs(got.total - total) / total
    clip_err = abs(got.clip_coefficient(0.1) - clip_want) / clip_want
    print(
        f"NORMS rank={dist.get_rank()} max_rel_err={err:.3e} total_rel_err={total_err:.3e} "
        f"clip_rel_err={clip_err:.3e} naive_ratio={naive / total:.4f}"
    )


if __name__ == "__main__":
    main()
