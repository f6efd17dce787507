"""What the compiled-host tests share (their sinks' fixture, `received`, is in
conftest.py): dynamo's counters around a run, and the check that a compiled run's series
are the plain run's."""

from __future__ import annotations

import math

STEPS = 12


def compiled_counts(run):
    """`run(compiled)` compiled from a fresh dynamo, and dynamo's counters after it."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    report = run()
    counted = (
        dict(counters["graph_break"]),
        counters["stats"]["unique_graphs"],
        dict(counters.get("recompiles", {})),
    )
    torch._dynamo.reset()
    return report, counted


def same_series(got, plain):
    """Each sink's points of the compiled run against the plain run's: the same steps
    and tags, the values within float32's rounding of a reordered sum."""
    assert got
    for points in got.values():
        assert [s for s, _ in points] == [s for s, _ in plain] == list(range(1, STEPS + 1))
        for (_, a), (_, b) in zip(points, plain, strict=True):
            assert a.keys() == b.keys() and {"loss", "grad_norm/total", "lr"} <= a.keys()
            assert all(math.isclose(a[t], b[t], rel_tol=1e-5, abs_tol=1e-7) for t in a), a


def batches():
    import torch

    g = torch.Generator().manual_seed(1)
    return [torch.randn(16, 8, generator=g) for _ in range(STEPS)]
