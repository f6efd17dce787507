"""Cost of `gradscope inspect` against the bare forward+backward it has to run.

Measures, in one process, for each case below: bare `loss.backward()` vs
`gradscope.inspect(..., explain=False)` (snapshot, parameters copied or write guard,
hooks, backward, fused statistics, one host sync, rules), interleaved, median of N
repeats; and the forward alone bare vs inside `preserve.preserved_state` (what the
snapshot and keeping the parameters cost). Then the peak resident memory of each in a fresh
subprocess for the 14M GPT, and the wall time of `gradscope --help` and
`--version` (which must not import torch) next to `import torch`.

Cases:
  gpt-14m     GPT-style decoder, 13.8M parameters, batch 4x128 (gradscope.examples)
  gpt2-124m   HF GPT-2 small built from its default config (no download), batch 1x64
  cnn-bn      a BatchNorm CNN of many small tensors, bare pass ~50-100 ms
  bert-small  HF BERT encoder from config (4 layers, hidden 256), batch 8x128, ~50-100 ms

    python benchmarks/bench_inspect.py [--repeat 11] [--threads 1] [--cases gpt-14m,...]

Budgets: <= 1.05x at 124M parameters with 64 tokens, <= 1.10x for any case whose
bare pass is >= 50 ms. Prints ratios; not a test (timings on a shared machine
are noisy: the medians of interleaved repeats are what to read).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

CONFIG = dict(vocab=8192, context=128, dim=384, heads=6, layers=6)
BATCH = 4
BUDGET_124M = 1.05
BUDGET_50MS = 1.10
GUARD_PER_CALL = [0.0]
"""Seconds the in-place write guard adds per torch call, measured once in main()."""


def build():
    """The 14M GPT (kept under this name for the memory subprocess)."""
    from gradscope.examples.transformer import GPTConfig, make_gpt

    return make_gpt(GPTConfig(**CONFIG), batch_size=BATCH)


def gpt14m() -> tuple[Any, Any, Any]:
    model, batch = build()
    return model, batch, None


def gpt2_small() -> tuple[Any, Any, Any]:
    import torch
    import transformers as hf

    torch.manual_seed(0)
    cfg = hf.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = hf.GPT2LMHeadModel(cfg).train()
    ids = torch.randint(0, cfg.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0))
    return model, {"input_ids": ids, "labels": ids}, None


def cnn_bn() -> tuple[Any, Any, Any]:
    import torch
    from torch import nn
    from torch.nn import functional as F

    def block(c_in: int, c_out: int, stride: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(),
        )

    torch.manual_seed(0)
    widths = [16, 16, 32, 32, 64, 64, 128, 128]
    layers = [block(3, 16, 1)]
    layers += [block(a, b, 2 if b != a else 1) for a, b in itertools.pairwise(widths)]
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(16, 3, 40, 40, generator=g), torch.randint(0, 10, (16,), generator=g)
    return model, x, lambda out: F.cross_entropy(out, y)


def bert_small() -> tuple[Any, Any, Any]:
    import torch
    import transformers as hf

    torch.manual_seed(0)
    cfg = hf.BertConfig(
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = hf.BertForSequenceClassification(cfg).train()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, cfg.vocab_size, (8, 128), generator=g)
    labels = torch.randint(0, 2, (8,), generator=g)
    return model, {"input_ids": ids, "labels": labels}, None


CASES: dict[str, Callable[[], tuple[Any, Any, Any]]] = {
    "gpt-14m": gpt14m,
    "gpt2-124m": gpt2_small,
    "cnn-bn": cnn_bn,
    "bert-small": bert_small,
}


def bare(model, batch, loss_fn=None) -> None:
    from gradscope.inspector.hooks import call_model, pick_loss

    model.zero_grad(set_to_none=True)
    pick_loss(call_model(model, batch), loss_fn)[0].backward()
    model.zero_grad(set_to_none=True)


def instrumented(model, batch, loss_fn=None):
    import gradscope

    return gradscope.inspect(model, batch, loss_fn, explain=False)


def forward(model, batch) -> None:
    import torch

    from gradscope.inspector.hooks import call_model

    with torch.enable_grad():
        call_model(model, batch)


def guarded_forward(model, batch) -> None:
    from gradscope.inspector import preserve

    with preserve.preserved_state(model):
        forward(model, batch)


def torch_calls(model, batch) -> int:
    """Torch function calls one forward makes: what the write guard intercepts."""
    from torch.overrides import TorchFunctionMode

    class Count(TorchFunctionMode):
        n = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        forward(model, batch)
    return Count.n


def guard_per_call(calls: int = 20000) -> float:
    """Seconds the write guard adds to one torch call (a tiny add, so the call is all there is)."""
    import torch

    from gradscope.inspector import preserve

    model, x = torch.nn.Linear(2, 2), torch.zeros(2)

    def loop() -> None:
        for _ in range(calls):
            torch.add(x, 1)

    def guarded() -> None:
        with preserve.preserved_state(model):
            loop()

    copied_up_to, preserve.COPIED_UP_TO = preserve.COPIED_UP_TO, 0  # this tiny model gets the guard
    try:
        bare_s = statistics.median(timed(loop) for _ in range(5))
        guarded_s = statistics.median(timed(guarded) for _ in range(5))
    finally:
        preserve.COPIED_UP_TO = copied_up_to
    return (guarded_s - bare_s) / calls


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def speed(name: str, repeat: int) -> None:
    model, batch, loss_fn = CASES[name]()
    n = sum(p.numel() for p in model.parameters())
    report = instrumented(model, batch, loss_fn)  # warm-up, and the findings must be none
    bare(model, batch, loss_fn)
    assert not report.findings, [f.message for f in report.findings]
    b, g, f, fg = [], [], [], []
    for i in range(repeat):
        if i % 2:  # alternate which goes first: the second runs on the first's warm memory
            g.append(timed(instrumented, model, batch, loss_fn))
            b.append(timed(bare, model, batch, loss_fn))
        else:
            b.append(timed(bare, model, batch, loss_fn))
            g.append(timed(instrumented, model, batch, loss_fn))
    for _ in range(repeat):  # apart: forwards alone leave memory unlike a whole pass does
        f.append(timed(forward, model, batch))
        fg.append(timed(guarded_forward, model, batch))
    mb, mg, mf, mfg = (statistics.median(v) for v in (b, g, f, fg))
    budget = BUDGET_124M if n >= 100e6 else (BUDGET_50MS if mb >= 0.05 else None)
    verdict = (
        ""
        if budget is None
        else f"  budget <= {budget:.2f}: {'ok' if mg / mb <= budget else 'OVER'}"
    )
    print(f"\n[{name}] {n / 1e6:.1f}M parameters, {len(list(model.modules()))} modules")
    print(f"  bare forward+backward      median {mb * 1e3:8.1f} ms  (min {min(b) * 1e3:.1f})")
    print(f"  gradscope.inspect          median {mg * 1e3:8.1f} ms  (min {min(g) * 1e3:.1f})")
    paired = statistics.median(x / y for x, y in zip(g, b, strict=True))
    print(f"  time ratio inspect/bare    {mg / mb:.3f}  (min/min {min(g) / min(b):.3f}){verdict}")
    print(f"  median of paired ratios    {paired:.3f}  (inspect over the bare pass just before)")
    print(
        f"  forward bare {mf * 1e3:.1f} ms, inside preserved_state {mfg * 1e3:.1f} ms "
        f"(snapshot + {keeping(model, batch)}: {(mfg - mf) * 1e3:+.1f} ms)"
    )


def keeping(model, batch) -> str:
    """How the parameters are kept: copied whole (small models) or by the write guard."""
    from gradscope.inspector import preserve

    if preserve._copy_up_front([p.data for p in model.parameters()]):
        return "parameters copied"
    calls = torch_calls(model, batch)
    return (
        f"write guard, {calls} torch calls guarded, ~{calls * GUARD_PER_CALL[0] * 1e3:.2f} ms "
        "at the measured per-call cost"
    )


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
        f"\n[gpt-14m] peak RSS bare {bare_mb:.0f} MiB, inspect {ours_mb:.0f} MiB, "
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
        f"\ngradscope --help {helps * 1e3:.0f} ms, --version {version * 1e3:.0f} ms, "
        f"python -c 'import torch' {torch_import * 1e3:.0f} ms (medians of {repeat})"
    )


def steady_malloc() -> bool:
    """Keep freed activations mapped (glibc), for bare and inspect alike.

    By default glibc gives every block over its mmap threshold back to the kernel on free,
    so each pass page-faults its activations in afresh, and how long that takes varies
    by a few ms a pass with what else the machine does: noise as large as the overhead
    being measured on a ~70 ms model. False where the C library is not glibc.
    """
    import ctypes
    import ctypes.util

    m_trim_threshold, m_mmap_threshold = -1, -3
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = libc.mallopt(m_mmap_threshold, 32 << 20) and libc.mallopt(m_trim_threshold, 1 << 30)
    except (OSError, AttributeError):
        return False
    return bool(ok)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=11)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--no-startup", action="store_true", help="skip memory and startup")
    parser.add_argument(
        "--default-malloc", action="store_true", help="leave glibc's mmap threshold as it is"
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} intra-op thread(s), {args.repeat} repeats")
    if not args.default_malloc and steady_malloc():
        print("glibc malloc: activations stay mapped between passes (--default-malloc: off)")
    GUARD_PER_CALL[0] = guard_per_call()
    print(f"write guard: {GUARD_PER_CALL[0] * 1e6:.2f} us per torch call (median of 5 x 20000)")
    for name in args.cases.split(","):
        if name == "gpt2-124m":
            try:
                import transformers  # noqa: F401
            except ImportError:
                print("\n[gpt2-124m] skipped: transformers is not installed")
                continue
        speed(name, args.repeat)
    if not args.no_startup:
        memory(args.threads)
        startup(5)


if __name__ == "__main__":
    main()
