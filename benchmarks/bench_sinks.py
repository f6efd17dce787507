"""Per-step cost of the sinks: `gradscope.watch` with every sink on (TensorBoard, wandb
offline, MLflow on a local SQLite store), every step written, against the same watch with
none, and against the bare step.

In one process, 1 thread: blocks of STEPS steps, bare, watched and watched with the
sinks, interleaved, REPEAT times; the median of each block's mean step time. The wandb
and MLflow runs are the script's own, started once before the blocks (as a Lightning or
HF logger starts them). Each watch first runs a read-back's worth of steps and waits for
them to be written: the sinks' process started, its libraries imported, gradscope's own
wandb run started, its MLflow run made, its event file opened (given apart, "opening").
A block ends when the sinks' process has written every step the block sent (a sync):
a process that fell behind is the block's cost.

CPU a step, as well: the training's process (its thread, and the thread that hands the
series over) and the sinks' process with wandb's service under it (psutil): the sinks'
work moved off the training's core is still work, on a busy machine it is the
training's.

    WANDB_MODE=offline python benchmarks/bench_sinks.py [--repeat 7] [--steps 50]

Prints ratios; not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import psutil
import torch
from bench_watch import block, charlm, mlp, tiny

FLUSH = 10
"""Steps between read-backs (the watch's flush_every)."""


def children_cpu() -> float:
    """CPU seconds of this process's children so far: the sinks' process, wandb-core."""
    kids = psutil.Process().children(recursive=True)
    total = 0.0
    for kid in kids:
        try:
            total += sum(kid.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def watched_block(step, steps: int, sinks: dict[str, str]) -> tuple[float, ...]:
    """One watched block: its mean step time, the CPU a step of the training's process,
    of its children, and the time a step waiting at the end for the sinks' process; the
    opening's wall time."""
    from gradscope import watch

    with watch(flush_every=FLUSH, **sinks) as w:
        drained = w.sinks.drained if hasattr(w, "sinks") else (lambda: None)
        opened = time.perf_counter()
        block(step, FLUSH + 1)  # the model's discovery, the sinks' opening: not the block's
        drained()
        opened = time.perf_counter() - opened
        kids, start, cpu = children_cpu(), time.perf_counter(), time.process_time()
        block(step, steps)
        waited = time.perf_counter()
        drained()  # what the block sent, written: the block's cost
        took, waited = time.perf_counter() - start, time.perf_counter() - waited
        cpu, kids = time.process_time() - cpu, children_cpu() - kids
    return (*(x / steps for x in (took, cpu, kids, waited)), opened)


def measure(name: str, build, repeat: int, steps: int, folder: str) -> None:
    sinks = {"tensorboard": f"{folder}/tb", "wandb": "bench", "mlflow": f"sqlite:///{folder}/m.db"}
    _, step = build()
    block(step, 3)
    bare: list[float] = []
    runs: dict[str, list[tuple[float, ...]]] = {"plain": [], "sunk": []}
    for r in range(repeat):
        for kind in ("bare", "plain", "sunk") if r % 2 else ("sunk", "plain", "bare"):
            if kind == "bare":
                bare.append(block(step, steps))
            else:
                runs[kind].append(watched_block(step, steps, sinks if kind == "sunk" else {}))
    mb = statistics.median(bare)
    (mp, cp, *_), (ms, cs, _, waited, opened) = (
        [statistics.median(x) for x in zip(*runs[k], strict=True)] for k in ("plain", "sunk")
    )
    kids = statistics.mean(r[2] for r in runs["sunk"])  # counted in clock ticks: summed
    print(
        f"{name:6} step {mb * 1e3:7.3f} ms bare, {mp * 1e3:7.3f} watched, {ms * 1e3:7.3f} "
        f"watched with every sink: ratio {ms / mp:.3f} to the watch, {ms / mb:.3f} to bare "
        f"(of which waiting for the sinks at the block's end {waited * 1e3:.3f} ms/step); "
        f"CPU ms/step of the training's process {cp * 1e3:.3f} watched, {cs * 1e3:.3f} with "
        f"the sinks ({cs / cp:.3f}); the sinks' process and wandb's service "
        f"{kids * 1e3:.3f} ({kids / cp:.3f} of the watched step's); the opening "
        f"{opened:.2f} s wall a run"
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

    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)  # MLflow's artifacts (./mlruns) there, not in the checkout
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
