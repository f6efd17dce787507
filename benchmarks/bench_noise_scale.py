"""What the gradient noise scale adds to `gradscope watch`, per step, on gradient accumulation.

The same run watched twice, in one process, 1 thread by default: today's watch with the
micro-batch measurement switched off (its hooks never attached), and the watch as it
ships (a tensor hook per parameter: on the CPU a norm per gradient as it arrives, on an
accelerator one fused norm per backward call). Blocks of STEPS optimizer steps of K
micro-batches each, interleaved, REPEAT times; the median step time of each and their
ratio (budget: 1.02). On a shared machine the medians drift, so the time inside the
measurement's own code (its hooks, begin, end) is also timed directly: "own". Models: a
~10M-parameter GPT (AdamW, clip_grad_norm_, 4 micro-batches of 8 × 64 tokens; `--tiny`:
of 2 × 64, where one read of the gradients weighs most) and an MLP (SGD, 8 micro-batches
of 256).

The fixed cost: per backward call (begin, end, one norm) on a model of one 1-element
tensor, and per parameter tensor (its hook) on a model of 200 such tensors, each the
difference of median backward times with and without the measurement.

    python benchmarks/bench_noise_scale.py [--repeat 5] [--steps 10] [--threads 1]
        [--device cuda]

Prints ratios; not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn import functional as F

from gradscope.watcher import watch
from gradscope.watcher.noise_scale import MicroGrads

OWN = [0.0]
"""Seconds spent in the measurement's own code (hooks, begin, end, take)."""


def timed_own() -> None:
    """Add the time inside MicroGrads' methods and its parameter hooks to OWN[0]: the
    added cost measured directly, immune to a shared machine's drift."""

    def timed(f: Callable[..., object]) -> Callable[..., object]:
        def wrapper(*args: object, **kwargs: object) -> object:
            start = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                OWN[0] += time.perf_counter() - start

        return wrapper

    hook = MicroGrads._hook
    MicroGrads._hook = lambda self, pos: timed(hook(self, pos))  # type: ignore[method-assign]
    for name in ("begin", "end", "take", "reset"):
        setattr(MicroGrads, name, timed(getattr(MicroGrads, name)))


@contextmanager
def measured(on: bool) -> Iterator[None]:
    """Today's watch (`on` False: the micro-batch hooks are never attached) or this one."""
    attach = MicroGrads.attach
    if not on:
        MicroGrads.attach = lambda self, calls: None  # type: ignore[method-assign]
    try:
        with watch(update_every=25, flush_every=10):
            yield
    finally:
        MicroGrads.attach = attach  # type: ignore[method-assign]


DEVICE = ["cpu"]


def sync() -> None:
    if DEVICE[0] == "cuda":
        torch.cuda.synchronize()


def gpt(k: int = 4, batch: int = 8) -> Callable[[], None]:
    from gradscope.examples.transformer import GPTConfig, make_gpt

    model, batch = make_gpt(
        GPTConfig(vocab=8192, context=64, dim=256, heads=4, layers=10), batch_size=batch
    )
    model.to(DEVICE[0])
    batch = {key: v.to(DEVICE[0]) for key, v in batch.items()}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    def step() -> None:
        for _ in range(k):
            (model(**batch).loss / k).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def mlp(k: int = 8) -> Callable[[], None]:
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    ).to(DEVICE[0])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(256, 256, device=DEVICE[0])
    y = torch.randint(0, 10, (256,), device=DEVICE[0])

    def step() -> None:
        for _ in range(k):
            (F.cross_entropy(model(x), y) / k).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def block(step: Callable[[], None], steps: int, on: bool) -> list[float]:
    times = []
    with measured(on):
        step()  # the first step finds the model (and attaches the hooks): not timed
        OWN[0] = 0.0
        for _ in range(steps):
            sync()
            start = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - start)
    return times


def ratio(name: str, step: Callable[[], None], repeat: int, steps: int) -> None:
    step()  # warm-up
    today, now, own = [], [], 0.0
    for r in range(repeat):  # alternate the order so that drift on a shared machine cancels
        for on in (r % 2 == 0, r % 2 == 1):
            (now if on else today).extend(block(step, steps, on))
            own += OWN[0] if on else 0.0
    a, b = statistics.median(today), statistics.median(now)
    per_step = own / len(now)
    print(
        f"{name:8} step {a * 1e3:8.2f} ms today, {b * 1e3:8.2f} ms with the noise scale: "
        f"{b / a:.3f}x; own {per_step * 1e3:.2f} ms/step = {1 + per_step / a:.4f}x"
    )


def fixed(tensors: int, repeat: int) -> float:
    """Median seconds per backward call with the measurement minus without it."""
    params = [nn.Parameter(torch.ones(1, device=DEVICE[0])) for _ in range(tensors)]
    opt = torch.optim.SGD(params, lr=0.0)

    def calls(on: bool) -> list[float]:
        times = []
        with measured(on):
            for _ in range(repeat):
                for _ in range(4):
                    loss = sum(p.sum() for p in params)
                    sync()
                    start = time.perf_counter()
                    loss.backward()
                    sync()
                    times.append(time.perf_counter() - start)
                opt.step()
                opt.zero_grad()
        return times

    on, off = [], []
    for r in range(6):
        (on if r % 2 else off).extend(calls(bool(r % 2)))
    return statistics.median(on) - statistics.median(off)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--tiny", action="store_true", help="also the GPT on 2 x 64 tokens")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    DEVICE[0] = args.device
    timed_own()
    print(
        f"torch {torch.__version__}, {args.device}, {args.threads} thread(s), "
        f"{args.repeat} repeats of "
        f"{args.steps} steps, interleaved; medians"
    )
    if args.tiny:
        ratio("gpt tiny", gpt(batch=2), args.repeat, args.steps)
    ratio("gpt", gpt(), args.repeat, args.steps)
    ratio("mlp", mlp(), args.repeat, args.steps)
    one = fixed(1, 200)
    many = fixed(200, 50)
    print(
        f"fixed cost per backward call {one * 1e6:.0f} µs; per parameter tensor "
        f"{(many - one) / 199 * 1e6:.2f} µs"
    )


if __name__ == "__main__":
    main()
