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
The writer thread's CPU time (thread_time) per step is given by part: the series
(computed once for every sink) and each sink, its first write (the sinks' opening: a
run found, a file opened, once a run) apart; and wandb's service process's CPU per step
(wandb-core: it takes each `log` from a socket). On 2 shared cores all of it is the
training's time too.

    WANDB_MODE=offline python benchmarks/bench_sinks.py [--repeat 7] [--steps 50]

Prints ratios; not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

import torch
from bench_watch import block, charlm, mlp, tiny

OWN = [0.0]
WRITER: dict[str, float] = {}
"""The writer thread's CPU seconds, by part (the series, each sink)."""


INSIDE = threading.local()


def timed_writer() -> None:
    """Accumulate the writer thread's CPU time in the series and in each sink, and
    MLflow's requests sent at the end (it holds its metrics up to 10 s: a block's are
    sent when its watch ends, on the training's thread)."""
    from gradscope.sinks.mlflow_sink import MlflowSink
    from gradscope.sinks.protocol import Sink
    from gradscope.sinks.series import Series

    def timing(part, original):
        def timed(self, *args, **kwargs):
            if getattr(INSIDE, "timing", False):  # a request sent inside steps: counted
                return original(self, *args, **kwargs)
            key = part or type(self).__name__.removesuffix("Sink").lower()
            if part is None and not self.written:
                key = "opening"  # a run found or started, a file opened: once a run
            INSIDE.timing, start = True, time.thread_time()
            try:
                return original(self, *args, **kwargs)
            finally:
                INSIDE.timing = False
                WRITER[key] = WRITER.get(key, 0.0) + time.thread_time() - start

        return timed

    Sink.steps = timing(None, Sink.steps)  # type: ignore[method-assign]
    Series.of = timing("series", Series.of)  # type: ignore[method-assign]
    MlflowSink._send = timing("mlflow", MlflowSink._send)  # type: ignore[method-assign]


def service_cpu() -> float:
    """CPU seconds of this process's children so far (wandb-core), 0 without psutil."""
    try:
        import psutil
    except ImportError:
        return 0.0
    kids = psutil.Process().children(recursive=True)
    return sum(sum(k.cpu_times()[:2]) for k in kids)


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
    bare, plain, sunk, own, service = [], [], [], 0.0, 0.0
    WRITER.clear()
    for r in range(repeat):
        order = ("bare", "plain", "sunk") if r % 2 else ("sunk", "plain", "bare")
        for kind in order:
            if kind == "bare":
                bare.append(block(step, steps))
                continue
            before = service_cpu()
            with watch(flush_every=10, **(sinks if kind == "sunk" else {})):
                step()  # the model's discovery: outside the block
                OWN[0] = 0.0
                (sunk if kind == "sunk" else plain).append(block(step, steps))
                own += OWN[0] if kind == "sunk" else 0.0
            service += service_cpu() - before if kind == "sunk" else 0.0
    mb, mp, ms = (statistics.median(x) for x in (bare, plain, sunk))
    written = repeat * (steps + 1)  # the writer writes the discovery step too
    opening = WRITER.pop("opening", 0.0) / repeat
    parts = ", ".join(f"{k} {v / written * 1e3:.3f}" for k, v in sorted(WRITER.items()))
    print(
        f"{name:6} step {mb * 1e3:7.3f} ms bare, {mp * 1e3:7.3f} watched, {ms * 1e3:7.3f} "
        f"watched with every sink: ratio {ms / mp:.3f} to the watch, {ms / mb:.3f} to bare; "
        f"own {own / (repeat * steps) * 1e3:.3f} ms/step; writer CPU ms/step: {parts} "
        f"(all {sum(WRITER.values()) / written * 1e3:.3f}), the sinks' opening "
        f"{opening * 1e3:.1f} ms a run; wandb service {service / written * 1e3:.3f} ms/step"
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
    timed_writer()
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
