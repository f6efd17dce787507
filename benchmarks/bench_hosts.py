"""Per-step cost of the Lightning callback against the same fit without it.

A tiny Lightning fit (an MLP of 4.5k parameters, batch 32: the watch's fixed cost per
step weighs most there), 1 thread, `--steps` optimizer steps per fit: bare, with
`gradscope.watch()` around the fit (the engine alone), with `GradscopeCallback()`
(live findings on), and with the live judge off; fits interleaved,
`--repeat` times. A fit's step time is the mean over its steps after the first 100 (each
of those has its update measured, as in any watch) of the time between two
on_train_batch_end calls: the read-backs and the live judgements count, Lightning's
set-up does not. Prints the median over fits of each, and the ratios to bare; also how
often the live judge ran and its share of the fit.

    python benchmarks/bench_hosts.py [--steps 400] [--repeat 5] [--cpu]

Not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import lightning as L
import torch
from torch import nn


class Net(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(
            nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 1)
        )

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


CLOCK = [time.perf_counter]
"""`--cpu`: this thread's CPU time (the fit runs in it), which a loaded machine's other
processes do not move."""


class Clock(L.Callback):
    def __init__(self) -> None:
        self.times: list[float] = []

    def on_train_batch_end(self, *args) -> None:
        self.times.append(CLOCK[0]())


def fit(steps: int, mode: str) -> tuple[float, object]:
    from gradscope.integrations.lightning import GradscopeCallback

    g = torch.Generator().manual_seed(0)
    x = torch.randn(32 * steps, 32, generator=g)
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x[:, :1].clone()), batch_size=32
    )
    clock = Clock()
    host = GradscopeCallback() if mode != "bare" else None
    if mode == "no-live":
        host.watch.live.budget = 1e-12  # judged once at most
    callbacks = [c for c in (host, clock) if c is not None]  # the clock after the host
    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    if mode == "watch":  # the engine alone around the same fit: gradscope.watch()
        import gradscope

        with gradscope.watch():
            trainer.fit(Net(), data)
    else:
        trainer.fit(Net(), data)
    gaps = [b - a for a, b in zip(clock.times[100:], clock.times[101:], strict=False)]
    return statistics.mean(gaps), host


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpu", action="store_true", help="thread CPU time, not wall time")
    args = ap.parse_args()
    if args.cpu:
        CLOCK[0] = time.thread_time
    torch.set_num_threads(1)
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    modes = ("bare", "watch", "callback", "no-live")
    times: dict[str, list[float]] = {m: [] for m in modes}
    judged = []
    for _ in range(args.repeat):
        for mode in modes:
            t, host = fit(args.steps, mode)
            times[mode].append(t)
            if mode == "callback":
                live = host.watch.live
                judged.append((live.judgements, live.spent_s))
    bare = statistics.median(times["bare"])
    for mode in modes:
        m = statistics.median(times[mode])
        print(f"{mode:9} {m * 1e3:7.3f} ms/step  {m / bare:5.3f}x bare")
    n, spent = judged[len(judged) // 2]
    print(f"live judge: {n} judgements in {args.steps} steps, {spent * 1e3:.1f} ms in all")


if __name__ == "__main__":
    main()
