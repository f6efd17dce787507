"""Cost of `gradscope graph` on a 12-layer transformer, against torchviz on the same graph.

    .venv/bin/python benchmarks/bench_graph.py [--repeats 5]

Every figure is a median of repeats, reported as a ratio to torchviz's own
`make_dot(loss, params).render(format="png")` on the same loss tensor:
gradscope full (one node per op) and collapsed (one node per module), each
built and rendered to PNG and written atomically. The forward pass is shared
(done once); the module trace that collapsing needs is timed against a bare
forward. Not a test: nothing here asserts a figure.

The file is also a target: `benchmarks/bench_graph.py:gpt12` draws
docs/images/transformer-graph.svg (see docs/graph.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch

from gradscope import graph
from gradscope.examples.transformer import GPTConfig, make_gpt
from gradscope.graph.collapse import trace_modules
from gradscope.report.write import write_file


def gpt12() -> Any:
    """The 12-layer GPT of the issue, as a gradscope target."""
    return make_gpt(GPTConfig(layers=12))


def median_time(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: imports, caches, the first `dot` start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    torch.set_num_threads(1)
    graph.check_dot("png")
    model, batch = gpt12()
    statuses = graph.probe_statuses(model, batch)
    with trace_modules(model) as trace, torch.enable_grad():
        loss = model(**batch).loss
    make_dot = graph.import_torchviz().make_dot
    params = dict(model.named_parameters())
    folder = tempfile.mkdtemp(prefix="bench-graph-")

    def torchviz_png() -> None:
        make_dot(loss, params=params).render(os.path.join(folder, "tv"), format="png", cleanup=True)

    def gradscope_png(collapse: str) -> Callable[[], None]:
        def run() -> None:
            d = graph.draw(loss, model, statuses, trace, graph.DrawOptions(collapse=collapse))
            write_file(os.path.join(folder, f"gs-{collapse}.png"), graph.render(d, "png"))

        return run

    def traced_forward() -> None:
        with trace_modules(model), torch.enable_grad():
            model(**batch)

    def bare_forward() -> None:
        with torch.enable_grad():
            model(**batch)

    base = median_time(torchviz_png, repeats)
    full = median_time(gradscope_png("none"), repeats)
    collapsed = median_time(gradscope_png("modules"), repeats)
    build = median_time(
        lambda: graph.draw(loss, model, statuses, trace, graph.DrawOptions(collapse="none")),
        repeats,
    )
    build_tv = median_time(lambda: make_dot(loss, params=params), repeats)
    fwd_traced, fwd_bare = median_time(traced_forward, repeats), median_time(bare_forward, repeats)
    drawn = graph.draw(loss, model, statuses, trace, graph.DrawOptions(collapse="modules"))
    print(
        f"12-layer GPT: {drawn.full_nodes} nodes full, {drawn.nodes} collapsed; "
        f"median of {repeats}, 1 thread"
    )
    print(f"torchviz make_dot + render png      {base * 1e3:8.1f} ms  1.00x")
    print(f"gradscope full, build + render png  {full * 1e3:8.1f} ms  {full / base:.2f}x")
    print(f"gradscope collapsed, build + render {collapsed * 1e3:8.1f} ms  {collapsed / base:.2f}x")
    print(
        f"build only (no dot): gradscope full {build * 1e3:.1f} ms vs make_dot "
        f"{build_tv * 1e3:.1f} ms  {build / build_tv:.2f}x"
    )
    print(
        f"forward with module trace           {fwd_traced * 1e3:8.1f} ms  "
        f"{fwd_traced / fwd_bare:.2f}x the bare forward"
    )


if __name__ == "__main__":
    main()
