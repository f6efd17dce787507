"""Whole-process CPU cost: `gradscope gradcheck` vs a plain script calling torch's gradcheck.

    .venv/bin/python benchmarks/bench_gradcheck_process.py [--repeats 5] [--size 3000]

The case is entmax's SparsemaxFunction (a real custom Function) on a 3,000-element float64
input. Both sides are fresh processes at one thread, so start-up counts: importing torch,
gradscope's own imports, torch's lazy imports on first use. The figure is user + system
CPU seconds of the child (median of the repeats), the ratio gradscope / plain script.
Not a test: it prints figures for the docs (performance.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile

SPEC = "entmax.activations:SparsemaxFunction"

PLAIN = """
import torch
from entmax.activations import SparsemaxFunction
torch.set_num_threads(1)
x = torch.randn({size}, generator=torch.Generator().manual_seed(0), dtype=torch.float64,
                requires_grad=True)
assert torch.autograd.gradcheck(SparsemaxFunction.apply, (x,), fast_mode=False)
"""


def cpu_seconds(command: list[str]) -> float:
    """User + system CPU of one child process, which must exit 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_cpu(command: list[str], repeats: int) -> float:
    return statistics.median(cpu_seconds(command) for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=3000)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "plain_gradcheck.py")
        with open(script, "w") as f:
            f.write(PLAIN.format(size=opts.size))
        plain = median_cpu([sys.executable, script], opts.repeats)
    ours = median_cpu(
        [sys.executable, "-m", "gradscope", "gradcheck", SPEC, "--shape", f"X={opts.size}"],
        opts.repeats,
    )
    baseline = median_cpu([sys.executable, "-c", "import torch, entmax"], opts.repeats)
    print(
        f"{SPEC} on {opts.size} float64 elements, 1 thread, CPU seconds (user + system), "
        f"medians of {opts.repeats}"
    )
    print(f"  import torch, entmax only             {baseline:6.2f} s")
    print(f"  plain script, torch slow gradcheck    {plain:6.2f} s")
    print(f"  gradscope gradcheck                   {ours:6.2f} s  ({ours / plain:.2f}x)")


if __name__ == "__main__":
    main()
