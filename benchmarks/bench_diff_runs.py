"""Time of `gradscope diff a.jsonl b.jsonl` on two long runs of a GPT-2-small-shaped model.

Two `watch --log` files of STEPS steps each are synthesised in the real format (a params
header, then `StepRecord.to_dict()` lines written as watch's StepLog writes them), with
GPT-2 small's 148 parameter tensors; the second run parts from the first at step
STEPS // 2 and its gap grows after. Timed: reading both logs and the comparison
(`gradscope.diff.runs.diff_logs`), and the terminal rendering; median of REPEAT.

    python benchmarks/bench_diff_runs.py [--steps 10000] [--repeat 3]

Prints seconds; not a test (timings on a shared machine are noisy).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import tempfile
import time

from gradscope.diff.runs import diff_logs
from gradscope.report import diff_runs_terminal
from gradscope.report.console import View
from gradscope.steps.records import StepRecord
from gradscope.watcher.session import json_safe

BLOCK = [
    "ln_1.weight",
    "ln_1.bias",
    "attn.c_attn.weight",
    "attn.c_attn.bias",
    "attn.c_proj.weight",
    "attn.c_proj.bias",
    "ln_2.weight",
    "ln_2.bias",
    "mlp.c_fc.weight",
    "mlp.c_fc.bias",
    "mlp.c_proj.weight",
    "mlp.c_proj.bias",
]
NAMES = [
    "transformer.wte.weight",
    "transformer.wpe.weight",
    *(f"transformer.h.{i}.{n}" for i in range(12) for n in BLOCK),
    "transformer.ln_f.weight",
    "transformer.ln_f.bias",
]
assert len(NAMES) == 148


def synthesise(path: str, steps: int, part_at: int | None, seed: int = 0) -> None:
    """A run's log: norms that drift and fall, a loss from ~11 to ~3; after `part_at` the
    norms move away from the reference's by a gap growing 1% a step."""
    rng = random.Random(seed)
    base = [0.05 + 0.5 * rng.random() for _ in NAMES]
    with open(path, "w") as f:
        f.write(json.dumps({"params": NAMES}) + "\n")
        for s in range(1, steps + 1):
            wobble = math.sin(s / 50)
            norms = [b * (1 + 0.1 * wobble) * (1 + 2 / (1 + s / 200)) for b in base]
            loss = 3 + 8 * math.exp(-s / 1500) + 0.05 * wobble
            if part_at is not None and s >= part_at:
                gap = 1e-3 * 1.01 ** (s - part_at)
                norms = [n * (1 + gap * ((k % 7) + 1)) for k, n in enumerate(norms)]
                loss *= 1 + gap
            record = StepRecord(
                step=s,
                optimizer=0,
                loss=loss,
                grad_norm=math.sqrt(sum(n * n for n in norms)),
                clipped_norm=None,
                max_norm=1.0,
                lrs=(6e-4 * min(1.0, s / 2000),),
                backward_calls=1,
                scale=None,
                skipped=False,
                carried_norm=None,
                param_norms=tuple(norms),
                update_ratios=tuple(1e-3 for _ in NAMES) if s % 25 == 1 else None,
                update_norm=0.5 if s % 25 == 1 else None,
                time_s=0.3 * s,
            )
            f.write(json.dumps(json_safe(record.to_dict())) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        a, b = os.path.join(folder, "a.jsonl"), os.path.join(folder, "b.jsonl")
        synthesise(a, args.steps, None)
        synthesise(b, args.steps, args.steps // 2)
        size = (os.path.getsize(a) + os.path.getsize(b)) / 2**20
        print(f"two logs of {args.steps} steps x {len(NAMES)} parameters: {size:.0f} MiB")
        diff_s, render_s = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = diff_logs(a, b)
            diff_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            diff_runs_terminal.render(result, View(80))
            render_s.append(time.perf_counter() - start)
        first = result.first
        print(f"first divergence: step {first.step if first else None}, {result.verdict()}")
        print(f"diff (read both + compare): median {statistics.median(diff_s):.2f} s of {diff_s}")
        print(f"terminal report: median {statistics.median(render_s) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
