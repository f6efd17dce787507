"""Per-step cost of the sinks: `gradscope.watch` with every sink on (TensorBoard, wandb
offline, MLflow on a local SQLite store), every step written, against the same watch with
none, and against the bare step.

In one process, 1 thread: blocks of STEPS steps, bare, watched and watched with the
sinks, interleaved, REPEAT times; the median of each block's mean step time. The wandb
and MLflow runs are the script's own, started once before the blocks (as a Lightning or
HF logger starts them), so a block measures the writing, not a run's start: each watch
first runs a read-back's worth of steps (the model's discovery, the sinks' opening:
gradscope's own wandb run started, its MLflow run made, its event file opened: about
0.1 s of CPU once a run, given apart) and waits for them to be written; the end of each
watch (findings, heatmap) is outside the block too. A block ends when what it queued is
written, MLflow's held metrics sent (a long run sends them every 1,000 metrics; here one
request a block). The time inside the sinks at each read-back is also measured directly
(perf_counter around the step listener) and given as a share of the bare step: "own".
The writer thread's CPU time (thread_time) per step is given by part: the series
(computed once for every sink) and each sink, its first write (the sinks' opening) apart;
wandb's service process's CPU per step (wandb-core: it takes each `log` from a socket);
and the CPU a step of the whole process (every thread: the training's, the writer,
wandb's own) plus wandb's service, watched against watched with every sink: what the
sinks cost where the cores are busy, less noisy than the step times on a shared machine.

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

FLUSH = 10
"""Steps between read-backs (the watch's flush_every)."""
OWN = [0.0]
WRITER: dict[str, float] = {}
"""The writer thread's CPU seconds, by part (the series, each sink)."""


INSIDE = threading.local()
COUNTS = {"handed": 0, "written": 0}
"""Read-backs handed to the writer; batches written, counted once per sink."""


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
                COUNTS["written"] += part is None  # a sink's steps, one batch

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


def settled(send: bool = False) -> None:
    """Wait for the sinks' writer to have written every read-back handed over (the thread
    stays: a run starts it once); with `send`, MLflow's held metrics sent too (a long run
    sends them every 1,000 metrics: a block's, one request at its end, are its share)."""
    from gradscope.sinks.attached import Sinks
    from gradscope.sinks.mlflow_sink import MlflowSink
    from gradscope.watcher.listeners import STEP_LISTENERS

    for listener in list(STEP_LISTENERS):
        if isinstance(listener, Sinks):
            while COUNTS["written"] < COUNTS["handed"] * len(listener.sinks):
                time.sleep(0.0005)
            for sink in listener.sinks:
                if send and isinstance(sink, MlflowSink) and sink.client is not None:
                    sink._send()


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
            COUNTS["handed"] += 1

    Sinks.__call__ = timed  # type: ignore[method-assign]


def watched_block(step, steps: int, sinks: dict[str, str]) -> tuple[float, ...]:
    """One watched block: its mean step time; the CPU a step of the training's thread,
    of the process's other threads (the writer, wandb's, TensorBoard's), of wandb's
    service and of MLflow's held metrics sent at the block's end (on the training's
    thread); and the time a step inside the hand-over (OWN)."""
    from gradscope import watch

    with watch(flush_every=FLUSH, **sinks):
        block(step, FLUSH + 1)  # the model's discovery, the sinks' opening: not the block's
        settled()
        service, start = service_cpu(), time.perf_counter()
        cpu, mine = time.process_time(), time.thread_time()
        OWN[0] = 0.0
        block(step, steps)
        sent = time.thread_time()
        settled(send=True)  # what the block queued, written: the block's cost
        sent = time.thread_time() - sent
        took = time.perf_counter() - start
        mine, cpu = time.thread_time() - mine, time.process_time() - cpu
        service = service_cpu() - service
    return tuple(x / steps for x in (took, mine, cpu - mine, service, OWN[0], sent))


def measure(name: str, build, repeat: int, steps: int, folder: str) -> None:
    sinks = {"tensorboard": f"{folder}/tb", "wandb": "bench", "mlflow": f"sqlite:///{folder}/m.db"}
    _, step = build()
    block(step, 3)
    bare: list[float] = []
    runs: dict[str, list[tuple[float, ...]]] = {"plain": [], "sunk": []}
    WRITER.clear()
    for r in range(repeat):
        for kind in ("bare", "plain", "sunk") if r % 2 else ("sunk", "plain", "bare"):
            if kind == "bare":
                bare.append(block(step, steps))
            else:
                runs[kind].append(watched_block(step, steps, sinks if kind == "sunk" else {}))
    mb = statistics.median(bare)
    (mp, tp, *_), (ms, _, others, _, own, sent) = (
        [statistics.median(x) for x in zip(*runs[k], strict=True)] for k in ("plain", "sunk")
    )
    service = statistics.mean(r[3] for r in runs["sunk"])  # counted in clock ticks: summed
    written = repeat * (steps + FLUSH + 1)  # the writer writes the opening's steps too
    opening = WRITER.pop("opening", 0.0) / repeat
    parts = ", ".join(f"{k} {v / written * 1e3:.3f}" for k, v in sorted(WRITER.items()))
    added = others + service + own + sent  # not the training's own, its noise is larger
    print(
        f"{name:6} step {mb * 1e3:7.3f} ms bare, {mp * 1e3:7.3f} watched, {ms * 1e3:7.3f} "
        f"watched with every sink: ratio {ms / mp:.3f} to the watch, {ms / mb:.3f} to bare; "
        f"own {own * 1e3:.3f} ms/step; writer CPU ms/step: {parts} "
        f"(all {sum(WRITER.values()) / written * 1e3:.3f}), the sinks' opening "
        f"{opening * 1e3:.1f} ms a run; CPU ms/step: the watched step's {tp * 1e3:.3f}, the "
        f"other threads {others * 1e3:.3f}, wandb's service {service * 1e3:.3f}, MLflow's "
        f"requests {sent * 1e3:.3f}: the sinks' CPU with the hand-over {added * 1e3:.3f} ms "
        f"a step, {added / tp:.3f} of the watched step's"
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
