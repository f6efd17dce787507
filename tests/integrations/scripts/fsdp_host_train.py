"""An FSDP2 loop (gloo, CPU) watched through the host path (the accelerate tracker's
`with`, on every rank), that also writes the unsharded reference gradient norms.

    torchrun --standalone --nproc_per_node=2 fsdp_host_train.py REPORT.json REF.json [block]

`block`: the loop inside a plain `gradscope.watch()` instead of the tracker.

Rank 0 writes, per step, each parameter's gradient L2 norm on an unsharded copy of the
model fed the whole global batch, and their total: what global norms must equal.
"""

import json
import math
import sys

import torch
import torch.distributed as dist
from torch import nn

import gradscope
from gradscope.examples.fsdp_train import sharded_pair
from gradscope.integrations import writing
from gradscope.integrations.accelerate import GradscopeTracker
from gradscope.watcher.distributed_hooks import is_main_process


class Block:
    """`gradscope.watch()` as the loop's watch: the report written by rank 0 at the end."""

    def __init__(self, report: str) -> None:
        self.path = report
        self.block = gradscope.watch(flush_every=2)

    def __enter__(self):
        self.block.__enter__()
        return self

    def __exit__(self, *exc):
        self.block.__exit__(*exc)
        if is_main_process():
            assert not writing.deliver(self.block.report, [self.path], self.block.settings)

    def log(self, values, step=None):
        pass


def main():
    report, ref = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    model, reference = sharded_pair(world)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(7)
    steps = []
    block = sys.argv[3:] == ["block"]
    watch = Block(report) if block else GradscopeTracker(outputs=[report], flush_every=2)
    with watch as tracker:
        for i in range(6):
            full_x = torch.randn(4 * world, 8, generator=gen)
            full_y = torch.randn(4 * world, 1, generator=gen)
            x, y = full_x[rank * 4 : rank * 4 + 4], full_y[rank * 4 : rank * 4 + 4]
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            reference.zero_grad()
            nn.functional.mse_loss(reference(full_x), full_y).backward()
            norms = {n: float(p.grad.double().norm()) for n, p in reference.named_parameters()}
            local = math.sqrt(
                sum(float(p.grad.to_local().double().square().sum()) for p in model.parameters())
            )
            steps.append(
                {
                    "norms": norms,
                    "total": math.sqrt(sum(v * v for v in norms.values())),
                    "local": local,
                }
            )
            opt.step()
            with torch.no_grad():  # the reference follows the same update
                for q, p in zip(reference.parameters(), model.parameters(), strict=True):
                    q.copy_(p.full_tensor())
            tracker.log({"loss": float(loss)}, step=i)
    if rank == 0:
        with open(ref, "w") as f:
            json.dump(steps, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
