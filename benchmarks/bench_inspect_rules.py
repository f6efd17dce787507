"""Time of inspect's rules against the instrumented pass, as the number of modules grows.

The rules are pure functions of the pass's statistics; each must stay near-linear in the
number of modules and parameters, or a model with thousands of sibling modules spends
minutes judging a pass that took a second. For each case below, at each size: one
instrumented pass (`probe.run`: hooks, forward, backward, fused statistics) and the rules
over its statistics (`rules.diagnose`), medians of N repeats, and the slowest rule.

Cases (N modules, all of them built here, no download):
  stack      nn.Sequential of N Linear(2, 2): the gradient vanishes to exact zeros, so
             the zero-grad and idle-expert rules see N alike siblings with no router
  nested     blocks of 4 (Linear, Tanh, Linear, residual block) nested 8 deep, repeated
  wide       nn.ModuleList of N Linear(2, 2) summed side by side, one in four never called
  experts    a top-1 router over N/2 experts of two Linears each: almost all experts idle
  gpt2-124m  HF GPT-2 small from its default config, batch 1x64 (about 160 modules)

    python benchmarks/bench_inspect_rules.py [--sizes 1000,10000] [--repeat 3] [--cases ...]

Budgets: rules <= 1 s at 10,000 modules, and <= 5% of the pass at GPT-2 small. Prints
the figures and `ok`/`OVER`; exits 1 when a budget is over.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

BUDGET_10K_S = 1.0
BUDGET_GPT2_SHARE = 0.05


def stack(n: int) -> tuple[Any, Any]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(2, 2) for _ in range(n)]), torch.randn(4, 2)


def nested(n: int) -> tuple[Any, Any]:
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, depth: int):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
            self.child = Block(depth - 1) if depth > 1 else None

        def forward(self, x):
            x = x + self.inner(x)
            return self.child(x) if self.child is not None else x

    torch.manual_seed(0)
    per_block = 4 * 8  # Block, Sequential, Linear, Tanh at each of 8 levels
    return nn.Sequential(*[Block(8) for _ in range(max(n // per_block, 1))]), torch.randn(4, 4)


def wide(n: int) -> tuple[Any, Any]:
    import torch
    from torch import nn

    class Wide(nn.Module):
        def __init__(self):
            super().__init__()
            self.branches = nn.ModuleList(nn.Linear(2, 2) for _ in range(n))

        def forward(self, x):
            return sum(b(x) for i, b in enumerate(self.branches) if i % 4)

    torch.manual_seed(0)
    return Wide(), torch.randn(4, 2)


def experts(n: int) -> tuple[Any, Any]:
    import torch
    from torch import nn

    count = max(n // 3, 2)  # an expert is three modules: its Sequential and two Linears

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(8, count)
            self.experts = nn.ModuleList(
                nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)) for _ in range(count)
            )

        def forward(self, x):
            gates = self.router(x).softmax(-1)
            top = gates.argmax(-1)
            out = torch.zeros_like(x)
            for e in top.unique().tolist():
                rows = top == e
                out[rows] = self.experts[e](x[rows]) * gates[rows, e : e + 1]
            return out

    torch.manual_seed(0)
    return MoE(), torch.randn(32, 8)


def gpt2_small(n: int) -> tuple[Any, Any]:
    import torch
    import transformers as hf

    torch.manual_seed(0)
    cfg = hf.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    ids = torch.randint(0, cfg.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0))
    return hf.GPT2LMHeadModel(cfg).train(), {"input_ids": ids, "labels": ids}


CASES: dict[str, Callable[[int], tuple[Any, Any]]] = {
    "stack": stack,
    "nested": nested,
    "wide": wide,
    "experts": experts,
    "gpt2-124m": gpt2_small,
}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def slowest_rule(stats: Any) -> tuple[str, float]:
    from gradscope.config import Settings
    from gradscope.rules import CHECKS

    thresholds = Settings().thresholds
    times = {rule: timed(lambda c=c: c(stats, thresholds))[0] for rule, c in CHECKS.items()}
    rule = max(times, key=lambda r: times[r])
    return rule, times[rule]


def measure(name: str, size: int, repeat: int) -> bool:
    """Print one line for (case, size); False when a budget is over."""
    from gradscope import rules
    from gradscope.inspector import probe

    model, batch = CASES[name](size)
    modules = sum(1 for _ in model.modules())
    passes, judged = [], []
    for _ in range(repeat):
        seconds, stats = timed(lambda: probe.run(model, batch, None, None))
        passes.append(seconds)
        judged.append(timed(lambda s=stats: rules.diagnose(s))[0])
    pass_s, rules_s = statistics.median(passes), statistics.median(judged)
    rule, rule_s = slowest_rule(stats)
    if name == "gpt2-124m":
        ok, budget = rules_s <= BUDGET_GPT2_SHARE * pass_s, f"<= {BUDGET_GPT2_SHARE:.0%} of pass"
    else:
        limit = BUDGET_10K_S * max(modules, 1) / 10_000
        ok, budget = rules_s <= max(limit, BUDGET_10K_S / 10), f"<= {BUDGET_10K_S:g} s per 10k"
    print(
        f"  {name:<10} {modules:>6} modules  pass {pass_s:8.3f} s  rules {rules_s:7.3f} s "
        f"({rules_s / pass_s:6.1%})  slowest {rule} {rule_s:.3f} s  {budget}: "
        f"{'ok' if ok else 'OVER'}"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated module counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), medians of {args.repeat}")
    ok = True
    for name in args.cases.split(","):
        sizes = [0] if name == "gpt2-124m" else [int(s) for s in args.sizes.split(",")]
        for size in sizes:
            ok = measure(name, size, args.repeat) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
