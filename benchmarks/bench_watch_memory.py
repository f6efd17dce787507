"""Memory `gradscope watch` keeps per optimizer step, against the number of parameter tensors.

In one process, as `gradscope watch` runs it (`gradscope.watcher.watch`, --update-every 25,
--flush-every 10): a warm-up, then tracemalloc traces the next STEPS steps; what is still
allocated at their end, divided by STEPS, is what the watch keeps per step (torch's own
tensors are not Python allocations and are not counted; the training loop here allocates
nothing that lives on). Two models with hundreds of tensors and one with a few:

- `linears`: nn.ModuleList of 300 Linear(8, 8) layers (600 tensors), SGD;
- `linears75`: the same with 75 layers (150 tensors);
- `mlp`: 3 Linear layers (6 tensors), SGD;
- `gpt` (only with --only gpt: ~25 ms a step): a 24-layer tiny transformer (dim 32,
  292 tensors), AdamW with clip_grad_norm_.

At the end the report is built from the run (the rules over every step) and its time
printed: the per-step store is read back into records there.

    python benchmarks/bench_watch_memory.py [--steps 20000] [--only linears]

Measured (torch 2.13 CPU, 20,000 steps, shared machine), B/step kept:

    model      tensors  every StepRecord  a column per field   runs of equal values
                        kept              + bounded detail     + bounded detail
                                          (rest/step)          (rest/step)
    linears        600            20,415    687 (10.4 MiB; 141)
    linears75      150             5,436    313 ( 2.9 MiB; 159)  189 (2.9 MiB; 34)
    mlp              6               644    186 ( 0.3 MiB; 171)   61 (0.3 MiB; 46)

The detail stops growing at 1,024 kept steps per optimizer (plus pins) in each of its two
stores; past that, a step costs the numbers that changed in it (steps/columns.py): the
loss, the gradient norm and the time, 24 bytes, whatever the model ("rest" counts each
column's array whole, reallocated after tracing began).

Prints figures; not a test (tests/watcher/test_watch_memory.py asserts the bound).

Peak memory, `--rss`: a GPT-2-style decoder whose parameter bytes dominate (tied
embedding, AdamW, batch 1×64, 1 thread) trained a few steps in a fresh process, once bare
(`python bench_watch_memory.py --train ...`) and once under `python -m gradscope watch`
(default options: every step's update measured), `--pairs` times (3); each child's peak
RSS (`ru_maxrss`, from `os.wait4`), each pair's ratio, and the median watched peak
against the median bare one. Exits 1 when that is above the budget (1.05×): a copy of
the parameters for the update/weight ratio (what `watch` did before) costs +1 parameter
size. The allocator is as users have it: with glibc's dynamic mmap threshold a freed
block may stay in the heap, so the same bare run peaks up to 8% apart from one process
to the next (at 0.35B, 6.25-6.76 GiB), and one pair's ratio is mostly that noise.
`--fixed-mmap` sets `MALLOC_MMAP_THRESHOLD_=131072` for both (every tensor's memory
returned when freed: less noise, but not what users run).

    python benchmarks/bench_watch_memory.py --rss [--layers 12 --dim 1024]   # 203M
    python benchmarks/bench_watch_memory.py --rss --layers 24 --dim 1024       # 0.35B
    python benchmarks/bench_watch_memory.py --rss --layers 18 --dim 2048       # 1.01B
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
import tracemalloc

import torch
from torch import nn
from torch.nn import functional as F


def linears(count: int):
    """`count` Linear(8, 8) layers side by side, applied in one batched matmul so that the
    step stays cheap: what grows with `count` is the number of tensors watched."""
    layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(count))
    opt = torch.optim.SGD(layers.parameters(), lr=1e-3)
    x = torch.randn(count, 4, 8)

    def step():
        weights = torch.stack([layer.weight for layer in layers])
        biases = torch.stack([layer.bias for layer in layers]).unsqueeze(1)
        loss = torch.baddbmm(biases, x, weights.transpose(1, 2)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    return layers, step


def gpt():
    from gradscope.examples.transformer import GPTConfig, make_gpt

    model, batch = make_gpt(
        GPTConfig(vocab=64, context=8, dim=32, heads=2, layers=24), batch_size=2
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return model, step


def mlp():
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return model, step


def measure(name: str, build, steps: int, warmup: int) -> None:
    from gradscope.watcher import watch

    model, step = build()
    tensors = len(list(model.parameters()))
    with watch(update_every=25, flush_every=10) as w:
        for _ in range(warmup):
            step()
        gc.collect()
        tracemalloc.start()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        took = time.perf_counter() - start
        start = time.perf_counter()  # leaving the block judges the run
    judged = time.perf_counter() - start
    report = w.report
    assert report is not None and len(report.run.steps) == warmup + steps
    detail = _detail_bytes(report.run)
    print(
        f"{name:9} {tensors:4} tensors: {kept / steps:9.1f} B/step kept over {steps} steps "
        f"({kept / 2**20:.2f} MiB), {took / steps * 1e3:.2f} ms/step traced; "
        f"{len(report.findings)} findings, judged in {judged:.1f} s"
    )
    if detail is not None:
        rows, size = detail
        print(
            f"{'':9} of which per-tensor detail (bounded): {rows} rows, {size / 2**20:.2f} MiB; "
            f"the rest: {(kept - size) / steps:.1f} B/step"
        )


def _detail_bytes(run) -> tuple[int, int] | None:
    """Rows of per-tensor detail the run keeps and their bytes (None before the store):
    the bounded part of what is kept."""
    store = getattr(run.steps, "detail", None)
    if store is None:
        return None
    rows = {id(r): r for r in [*run.steps.detail.rows.values(), *run.steps.sampled.rows.values()]}
    size = sum(
        sys.getsizeof(r.norms) + (0 if r.ratios is None else sys.getsizeof(r.ratios))
        for r in rows.values()
    )
    return len(rows), size


def train(layers: int, dim: int, steps: int) -> None:
    """The training script of --rss: a GPT-2-style decoder, AdamW, batch 1×64."""
    from gradscope.examples.transformer import GPTConfig, make_gpt

    torch.set_num_threads(1)
    config = GPTConfig(vocab=50304, context=64, dim=dim, heads=16, layers=layers)
    model, batch = make_gpt(config, batch_size=1)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    for _ in range(steps):
        loss = model(**batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    n = sum(p.numel() for p in model.parameters())
    print(f"{n / 1e6:.1f}M parameters, {steps} steps, loss {loss.item():.3f}", file=sys.stderr)


def peak_rss(command: list[str]) -> tuple[float, float]:
    """Peak RSS in GiB (ru_maxrss of that child alone) and wall seconds of `command`."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    took = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: watch reported findings
        raise SystemExit(f"failed ({status}): {' '.join(command)}")
    return usage.ru_maxrss / 2**20, took


def rss(layers: int, dim: int, steps: int, pairs: int, fixed_mmap: bool) -> bool:
    """`pairs` pairs of fresh processes, bare then watched; True when the median watched
    peak is within the budget of the median bare one (with glibc's dynamic threshold one
    bare process peaks up to 8% above another: a single pair is mostly that noise)."""
    here = os.path.abspath(__file__)
    script = ["--", "--train", "--layers", str(layers), "--dim", str(dim), "--steps", str(steps)]
    os.environ["OMP_NUM_THREADS"] = "1"
    if fixed_mmap:  # every freed tensor's memory returned at once: less noise, not as users run
        os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(128 * 1024))
    glibc = os.environ.get("MALLOC_MMAP_THRESHOLD_", "dynamic (glibc's default)")
    print(
        f"GPT-2-style, {layers} layers, dim {dim}, AdamW, batch 1x64, {steps} steps, 1 thread, "
        f"mmap threshold {glibc}: peak RSS"
    )
    bares, watcheds = [], []
    for k in range(pairs):
        bare, bare_s = peak_rss([sys.executable, here, *script[1:]])
        watched, watched_s = peak_rss([sys.executable, "-m", "gradscope", "watch", here, *script])
        bares.append(bare)
        watcheds.append(watched)
        print(
            f"  pair {k + 1}: bare {bare:.2f} GiB ({bare_s:.0f} s), watched {watched:.2f} GiB "
            f"({watched_s:.0f} s): {watched / bare:.3f}x",
            flush=True,
        )
    ratio = statistics.median(watcheds) / statistics.median(bares)
    worst = max(w / b for w, b in zip(watcheds, bares, strict=True))
    print(
        f"  medians: bare {statistics.median(bares):.2f} GiB, watched "
        f"{statistics.median(watcheds):.2f} GiB: {ratio:.3f}x (budget 1.05x); worst pair "
        f"{worst:.3f}x; bare alone {min(bares):.2f}-{max(bares):.2f} GiB"
    )
    return ratio <= 1.05


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=["linears", "linears75", "mlp", "gpt"])
    parser.add_argument("--rss", action="store_true", help="peak RSS, watched vs bare")
    parser.add_argument("--pairs", type=int, default=3, help="--rss: bare/watched pairs")
    parser.add_argument(
        "--fixed-mmap",
        action="store_true",
        help="--rss: MALLOC_MMAP_THRESHOLD_=131072 for both (less noise; users run without)",
    )
    parser.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--dim", type=int, default=1024)
    args = parser.parse_args()
    if args.train:
        return train(args.layers, args.dim, args.steps or 4)
    if args.rss:
        held = rss(args.layers, args.dim, args.steps or 4, args.pairs, args.fixed_mmap)
        raise SystemExit(0 if held else 1)
    args.steps = args.steps or 20000
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.steps} steps traced")
    models = {
        "linears": lambda: linears(300),
        "linears75": lambda: linears(75),
        "mlp": mlp,
        "gpt": gpt,
    }
    for name, build in models.items():
        if args.only == name or (args.only is None and name != "gpt"):
            measure(name, build, args.steps, args.warmup)


if __name__ == "__main__":
    main()
