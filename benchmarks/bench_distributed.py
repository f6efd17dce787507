"""Collective cost of one statistics gathering: one stacked all_reduce vs one per tensor.

Under torchrun (gloo, CPU), for a model of ~100 parameter tensors (a 24-block MLP
with LayerNorm: 98 tensors plus a head), each rank computes the per-parameter squared
gradient norms and sums them over ranks in two ways, interleaved, REPEAT times:

- stacked:   one all_reduce of the [P] float64 vector (what gradscope does, through
             `Rank.all_reduce`, which also writes its arrival key to the store);
- per-param: one all_reduce per parameter (what `.full_tensor()` or a per-tensor
             `dist.all_reduce` loop costs).

Both give the same numbers (checked). Prints the medians in ms and their ratio.

    torchrun --standalone --nproc_per_node=2 benchmarks/bench_distributed.py [--repeat 30]

1 thread per rank (torch.set_num_threads). Not a test: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn


def model(blocks: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.Linear(64, 64), nn.LayerNorm(64), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(64, 1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=24)
    args = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    from gradscope.distributed import context
    from gradscope.distributed.norms import squared_norms

    rank = context.current()
    assert rank is not None, "run under torchrun with 2 or more ranks"
    net = model(args.blocks)
    torch.manual_seed(rank.rank)
    net(torch.randn(32, 64)).pow(2).mean().backward()
    params = list(net.parameters())
    grads = [p.grad for p in params]

    def stacked() -> torch.Tensor:
        return rank.all_reduce(squared_norms(grads), "bench")

    def per_param() -> torch.Tensor:
        out = []
        for g in grads:
            sq = g.detach().double().norm().square().reshape(1)
            dist.all_reduce(sq)
            out.append(sq)
        return torch.cat(out)

    assert torch.allclose(stacked(), per_param(), rtol=1e-6)  # also a warm-up
    times: dict[str, list[float]] = {"stacked": [], "per-param": []}
    for _ in range(args.repeat):
        for name, fn in (("stacked", stacked), ("per-param", per_param)):
            dist.barrier()
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    if rank.is_main:
        a, b = statistics.median(times["stacked"]), statistics.median(times["per-param"])
        print(
            f"{len(params)} tensors, {rank.world} ranks ({rank.backend}), 1 thread, "
            f"{args.repeat} repeats, medians: one stacked all_reduce {a:.2f} ms "
            f"(includes the local norms), one all_reduce per tensor {b:.2f} ms: "
            f"{b / a:.1f}x"
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
