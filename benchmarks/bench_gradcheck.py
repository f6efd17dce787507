"""Time to verdict: gradscope gradcheck vs torch.autograd.gradcheck on a 3,000-element input.

    .venv/bin/python benchmarks/bench_gradcheck.py [--repeats 5] [--size 3000]

Three custom Functions: the tutorial's ReLU (correct), the same with a backward off by a
factor 1.01, and a clamp whose backward leaks 0.1% of the gradient above its upper bound.
For each: torch slow mode (the reference verdict), torch fast mode, gradscope's sampled
verdict (explain=False) and gradscope with the full-resolution explanation of what failed.
Medians of several repeats, one thread. Not a test: it prints figures for the docs.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from gradscope.examples.functions import CustomReLU
from gradscope.gradcheck import check

warnings.filterwarnings("ignore")


class ReLUOffByOnePercent(CustomReLU):
    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (input,) = ctx.saved_tensors
        grad = grad_output.clone() * 1.01
        grad[input < 0] = 0
        return grad


class ClampLeaksAboveBound(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(-2.5, 2.5)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        inside = ((x >= -2.5) & (x <= 2.5)).to(grad.dtype)
        return grad * torch.where(x > 2.5, 0.001, inside)


CASES = [
    ("CustomReLU (correct)", CustomReLU),
    ("ReLU, backward x 1.01", ReLUOffByOnePercent),
    ("clamp leaking above 2.5", ClampLeaksAboveBound),
]


def timed(fn: Callable[[], bool], repeats: int) -> tuple[bool, float]:
    verdicts, times = set(), []
    for _ in range(repeats):
        start = time.perf_counter()
        verdicts.add(fn())
        times.append(time.perf_counter() - start)
    assert len(verdicts) == 1, "verdict changed between repeats"
    return verdicts.pop(), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=3000)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(
        opts.size,
        generator=torch.Generator().manual_seed(1),
        dtype=torch.float64,
        requires_grad=True,
    )
    check(CustomReLU, inputs=(x,))  # warm-up: first calls pay for lazy initialisation
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread, float64 input of "
        f"{opts.size} elements, medians of {opts.repeats} repeats (torch slow mode: "
        f"{max(1, opts.repeats // 2)})\n"
    )
    head = (
        f"{'case':26} {'torch slow':>16} {'torch fast':>16} {'gradscope verdict':>22} "
        f"{'gradscope + explain':>22}"
    )
    print(head + "\n" + "-" * len(head))
    for label, fn in CASES:
        apply = fn.apply
        slow = timed(
            lambda apply=apply: torch.autograd.gradcheck(
                apply, (x,), fast_mode=False, raise_exception=False
            ),
            max(1, opts.repeats // 2),
        )
        fast = timed(
            lambda apply=apply: torch.autograd.gradcheck(
                apply, (x,), fast_mode=True, raise_exception=False
            ),
            opts.repeats,
        )
        verdict = timed(
            lambda apply=apply: check(apply, inputs=(x,), explain=False).passed, opts.repeats
        )
        full = timed(lambda apply=apply: check(apply, inputs=(x,)).passed, opts.repeats)
        assert verdict[0] == full[0] == slow[0], f"{label}: verdicts differ from slow mode"
        print(f"{label:26} {_cell(slow)} {_cell(fast)} {_cell(verdict, slow)} {_cell(full, slow)}")
    print(
        "\npass/FAIL and median seconds; (Nx) = torch slow mode's time / gradscope's. "
        "torch fast mode's verdict is shown, not required to match."
    )


def _cell(result: tuple[bool, float], reference: tuple[bool, float] | None = None) -> str:
    verdict, seconds = result
    text = f"{'pass' if verdict else 'FAIL'} {seconds:7.3f}s"
    if reference is not None:
        text += f" ({reference[1] / seconds:5.0f}x)"
    return text.rjust(22 if reference else 16)


if __name__ == "__main__":
    main()
