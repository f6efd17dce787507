"""Per-step cost of the sinks: `gradscope.watch` with every sink on (TensorBoard, wandb
offline, MLflow on a local SQLite store), every step written, against the same watch with
none, and against the bare step.

In one process, 1 thread: blocks of STEPS steps, bare, watched and watched with the
sinks, interleaved, REPEAT times; the median of each block's mean step time. The wandb
and MLflow runs are the script's own, started once before the blocks (as a Lightning or
HF logger starts them), so a block measures the writing, not a run's start; a block's
first step (the model's discovery) and the end of each watch (findings, heatmap) are
outside it. The time inside the sinks at each read-back is also measured directly
(perf_counter around the step listener) and given as a share of the bare step: "own".

    WANDB_MODE=offline python benchmarks/bench_sinks.py [--repeat 7] [--steps 50]

Prints ratios; not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
from bench_watch import block, charlm, mlp, tiny

OWN = [0.0]


def timed_sinks() -> None:
    """Accumulate the time spent writing the sinks at each read-back into OWN[0]."""
    from gradscope.sinks.attached import Sinks

    original = Sinks.__call__

    def timed(self, records, names):
        start = time.perf_counter()
        try:
            return original(self, records, names)
        finally:
            OWN[0] += time.perf_counter() - start

    Sinks.__call__ = timed  # type: ignore[method-assign]


def measure(name: str, build, repeat: int, steps: int, folder: str) -> None:
    from gradscope import watch

    sinks = {"tensorboard": f"{folder}/tb", "wandb": "bench", "mlflow": f"sqlite:///{folder}/m.db"}
    _, step = build()
    block(step, 3)
    bare, plain, sunk, own = [], [], [], 0.0
    for r in range(repeat):
        order = ("bare", "plain", "sunk") if r % 2 else ("sunk", "plain", "bare")
        for kind in order:
            if kind == "bare":
                bare.append(block(step, steps))
                continue
            with watch(flush_every=10, **(sinks if kind == "sunk" else {})):
                step()  # the model's discovery: outside the block
                OWN[0] = 0.0
                (sunk if kind == "sunk" else plain).append(block(step, steps))
                own += OWN[0] if kind == "sunk" else 0.0
    mb, mp, ms = (statistics.median(x) for x in (bare, plain, sunk))
    per_step_own = own / (repeat * steps)
    print(
        f"{name:6} step {mb * 1e3:7.3f} ms bare, {mp * 1e3:7.3f} watched, {ms * 1e3:7.3f} "
        f"watched with every sink: ratio {ms / mp:.3f} to the watch, {ms / mb:.3f} to bare; "
        f"own {per_step_own * 1e3:.3f} ms/step = {1 + per_step_own / mb:.3f}x bare"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--only", choices=["tiny", "mlp", "charlm"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("WANDB_MODE", "offline")
    os.environ.setdefault("WANDB_SILENT", "true")
    import mlflow
    import wandb

    timed_sinks()
    with tempfile.TemporaryDirectory() as folder:
        mlflow.set_tracking_uri(f"sqlite:///{folder}/m.db")
        with wandb.init(project="bench", dir=folder), mlflow.start_run():
            print(
                f"torch {torch.__version__}, 1 thread, {args.repeat} repeats of {args.steps} "
                "steps, interleaved; medians; every step written to every sink"
            )
            for name, build in (("tiny", tiny), ("mlp", mlp), ("charlm", charlm)):
                if args.only in (None, name):
                    measure(name, build, args.repeat, args.steps, folder)


if __name__ == "__main__":
    main()
