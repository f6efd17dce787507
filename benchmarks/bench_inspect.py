"""Cost of `gradscope inspect` against the bare forward+backward it has to run.

Measures, in one process, a GPT-style decoder of ~14M parameters on the CPU:
bare `loss.backward()` vs `gradscope.inspect(...)` (hooks, fused statistics, one
host sync, rules), interleaved, median of N repeats; then the peak resident
memory of each in a fresh subprocess; then the wall time of `gradscope --help`
and `--version` (which must not import torch) next to `import torch`.

    python benchmarks/bench_inspect.py [--repeat 7] [--threads 1]

Prints ratios; not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CONFIG = dict(vocab=8192, context=128, dim=384, heads=6, layers=6)
BATCH = 4


def build():
    from gradscope.examples.transformer import GPTConfig, make_gpt

    return make_gpt(GPTConfig(**CONFIG), batch_size=BATCH)


def bare(model, batch) -> None:
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)


def instrumented(model, batch):
    import gradscope

    return gradscope.inspect(model, batch)


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def speed(repeat: int) -> None:
    model, batch = build()
    n = sum(p.numel() for p in model.parameters())
    report = instrumented(model, batch)  # warm-up, and the findings must be none
    bare(model, batch)
    assert not report.findings, [f.message for f in report.findings]
    b, g = [], []
    for _ in range(repeat):
        b.append(timed(bare, model, batch))
        g.append(timed(instrumented, model, batch))
    mb, mg = statistics.median(b), statistics.median(g)
    print(f"model: GPT {CONFIG}, {n / 1e6:.1f}M parameters, batch {BATCH}x{CONFIG['context']}")
    print(f"bare forward+backward     median {mb * 1e3:8.1f} ms  (min {min(b) * 1e3:.1f})")
    print(f"gradscope.inspect         median {mg * 1e3:8.1f} ms  (min {min(g) * 1e3:.1f})")
    print(f"time ratio inspect/bare   {mg / mb:.3f}  (target <= 1.15)")


def peak_rss(mode: str, threads: int) -> float:
    code = (
        f"import resource, torch, sys; torch.set_num_threads({threads}); "
        "sys.path.insert(0, 'benchmarks'); import bench_inspect as b; "
        f"m, x = b.build(); b.{mode}(m, x); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) / 1024


def memory(threads: int) -> None:
    bare_mb, ours_mb = peak_rss("bare", threads), peak_rss("instrumented", threads)
    print(
        f"peak RSS bare {bare_mb:.0f} MiB, inspect {ours_mb:.0f} MiB, "
        f"ratio {ours_mb / bare_mb:.3f} (a second copy of all gradients would add "
        f"{sum_grad_mib():.0f} MiB)"
    )


def sum_grad_mib() -> float:
    from gradscope.examples.transformer import GPT, GPTConfig

    model = GPT(GPTConfig(**CONFIG))
    return sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20


def startup(repeat: int) -> None:
    def run(args: list[str]) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(args, capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        return statistics.median(times)

    py = sys.executable
    helps = run([py, "-m", "gradscope", "--help"])
    version = run([py, "-m", "gradscope", "--version"])
    torch_import = run([py, "-c", "import torch"])
    print(
        f"gradscope --help {helps * 1e3:.0f} ms, --version {version * 1e3:.0f} ms, "
        f"python -c 'import torch' {torch_import * 1e3:.0f} ms (medians of {repeat})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} intra-op thread(s), {args.repeat} repeats")
    speed(args.repeat)
    memory(args.threads)
    startup(5)


if __name__ == "__main__":
    main()
