"""What a watched run keeps per step: a few numbers, whatever the number of tensors; the
per-tensor detail bounded; every field read back as it was recorded."""

from __future__ import annotations

import gc
import itertools
import math
import random
import tracemalloc

from gradscope.steps.detail import Decimated, Row
from gradscope.steps.records import ParamInfo, StepRecord, WatchRun
from gradscope.steps.step_store import JUMPS_KEPT, StepStore

TENSORS = 300
BOUND = 64
ROWS = [tuple(random.Random(k).random() for _ in range(TENSORS)) for k in range(7)]


def _step(n: int, rng: random.Random) -> StepRecord:
    """Step n of a run of TENSORS tensors, as the recorder reads it back (the norms drawn
    from a few rows made beforehand, so that the test spends its time in the store)."""
    norms = ROWS[n % len(ROWS)]
    sampled = (n - 1) % 25 == 0
    return StepRecord(
        step=n,
        optimizer=0,
        loss=rng.random(),
        grad_norm=rng.random(),
        clipped_norm=None,
        max_norm=None,
        lrs=(0.1 * (1 - n / 1e5),),  # a schedule: the learning rate changes every step
        backward_calls=1,
        scale=None,
        skipped=False,
        carried_norm=None,
        param_norms=norms,
        update_ratios=norms if sampled else None,
        update_norm=0.01 if sampled else None,
        time_s=n * 1e-3,
    )


def test_memory_per_step_is_a_few_numbers_whatever_the_number_of_tensors():
    """5,000 steps of 300 tensors, read back in batches of 10 as the recorder does."""
    rng = random.Random(0)
    store = StepStore(detail_steps=BOUND)
    steps = 5000
    tracemalloc.start()  # from the start: a column reallocated later counts whole
    try:
        for first in range(1, steps + 1, 10):
            store.extend([_step(n, rng) for n in range(first, first + 10)])
            if first + 9 == steps // 2:
                gc.collect()
                half, _ = tracemalloc.get_traced_memory()
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    kept -= half
    per_step = kept / (steps // 2)
    # columns of ~16 numbers; 300 tensors kept at every step would be ~10 kB a step
    assert per_step < 200, f"{per_step:.0f} B kept per step"
    assert len(store) == steps
    most = BOUND + 2 + JUMPS_KEPT + 1  # grid, first and latest, jumps, first non-finite
    assert len(store.detail.rows) <= most and len(store.sampled.rows) <= BOUND + 2


def test_the_detail_keeps_first_latest_and_pinned_steps_on_an_even_grid():
    kept = Decimated(capacity=8)
    for i in range(100):
        kept.offer(i, 0, Row(_row(i)), pin=i == 37)
    rows = sorted(kept.rows)
    assert rows[0] == 0 and rows[-1] == 99 and 37 in rows
    grid = [i for i in rows if i not in (37, 99)]
    assert len(grid) <= 8 and len({b - a for a, b in itertools.pairwise(grid)}) == 1  # even


def test_each_optimizer_keeps_its_own_detail():
    """Alternating D and G steps: a shared grid of even stride would keep only D's."""
    kept = Decimated(capacity=8)
    for i in range(200):
        kept.offer(i, i % 2, Row(_row(i)))
    assert {i % 2 for i in kept.rows} == {0, 1}
    assert sum(i % 2 for i in kept.rows) >= 8


def _row(i: int):
    from array import array

    return array("d", [float(i)])


def _varied(n: int) -> StepRecord:
    """A record with every field set one way or another, NaN and None both."""
    return StepRecord(
        step=n,
        optimizer=n % 2,
        loss=None if n % 5 == 0 else (math.nan if n == 7 else 1.0 / n),
        grad_norm=math.inf if n == 9 else float(n),
        clipped_norm=None if n % 3 else 0.5,
        max_norm=None if n % 3 else 1.0,
        lrs=(0.1, 0.01) if n < 6 else (0.05,),
        backward_calls=1 + n % 4,
        scale=None if n % 4 else 65536.0,
        skipped=n == 8,
        carried_norm=None if n % 6 else 0.25,
        param_norms=(float(n), None, 0.0, math.nan if n == 9 else 1.0),
        update_ratios=(1e-3, math.nan, 0.0, math.inf) if n % 5 == 1 else None,
        update_norm=0.1 if n % 5 == 1 else None,
        time_s=n / 7,
        scaled_clip=n % 3 == 0 and n % 2 == 0,
        clip_total=None if n % 3 else math.nan if n == 3 else 2.0,
        norm_type=None if n % 3 else math.inf,
        clip_scale=None if n % 6 else 1024.0,
    )


def _same(a: StepRecord, b: StepRecord) -> bool:
    """Field by field, NaN equal to NaN."""
    return all(_eq(x, getattr(b, name)) for name, x in vars(a).items())


def _eq(x, y) -> bool:
    if isinstance(x, tuple) and isinstance(y, tuple):
        return len(x) == len(y) and all(_eq(u, v) for u, v in zip(x, y, strict=True))
    both_nan = isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)
    return both_nan or x == y


def test_every_field_reads_back_as_it_was_recorded():
    records = [_varied(n) for n in range(1, 31)]
    store = StepStore.of(records)
    assert len(store) == 30 and all(_same(a, b) for a, b in zip(records, store, strict=True))
    assert _same(store[-1], records[-1]) and [r.step for r in store[2:5]] == [3, 4, 5]


def test_steps_beyond_the_bound_read_back_their_totals_without_detail():
    records = [_varied(n) for n in range(1, 301)]
    store = StepStore.of(records, detail_steps=8)
    thin = [r for r in store if not r.detail]
    assert thin and all(r.param_norms == () and r.update_ratios is None for r in thin)
    assert all(r.to_dict()["param_norms"] is None for r in thin)
    for kept, original in zip(store, records, strict=True):
        totals = {k: v for k, v in vars(original).items() if k not in ("param_norms", "detail")}
        if not kept.detail:
            totals["update_ratios"] = None
        assert all(_eq(getattr(kept, k), v) for k, v in totals.items())


def test_a_run_of_records_is_padded_to_its_parameters():
    params = tuple(ParamInfo(f"p{i}", (2,), True, True, 0.1) for i in range(3))
    short = StepRecord(1, 0, 1.0, 1.0, None, None, (0.1,), 1, None, False, None, (1.0,), (0.5,))
    run = WatchRun("t", params, (short,), "completed", 1.0)
    (r,) = run.steps
    assert r.param_norms == (1.0, None, None)
    assert r.update_ratios is not None and r.update_ratios[0] == 0.5
    assert all(math.isnan(v) for v in r.update_ratios[1:])
