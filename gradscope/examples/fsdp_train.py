"""A plain FSDP2 (`fully_shard`) training loop on CPU (gloo), healthy.

    torchrun --standalone --nproc_per_node=2 -m gradscope watch \\
        gradscope/examples/fsdp_train.py

`sharded_pair` also gives an unsharded copy of the model, the reference that the test
suite's tests/distributed/scripts/fsdp_reference_train.py compares gradscope's norms to.
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
    args = ap.parse_args()
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    model, _ = sharded_pair(world)
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
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
