"""A long watched run keeps a few floats per step: the numbers that changed in it, not
one of each field; every step still reads back exactly as it was recorded."""

from __future__ import annotations

import gc
import math
import random
import tracemalloc
from collections.abc import Callable

import pytest
from test_watch_memory import _same

from gradscope.steps.columns import StepColumn
from gradscope.steps.step_record import StepRecord
from gradscope.steps.step_store import StepStore

STEPS = 8_000
TENSORS = 4
NORMS = [tuple(random.Random(k).random() for _ in range(TENSORS)) for k in range(5)]


def _plain(n: int, rng: random.Random) -> StepRecord:
    """Step n of a 4-tensor model under SGD, as the recorder reads it back: the update
    measured at each of the first 100 steps, then every 25th."""
    sampled = n <= 100 or (n - 1) % 25 == 0
    norms = NORMS[n % len(NORMS)]
    return StepRecord(
        step=n,
        optimizer=0,
        loss=rng.random(),
        grad_norm=rng.random(),
        clipped_norm=None,
        max_norm=None,
        lrs=(0.1,),
        backward_calls=1,
        scale=None,
        skipped=False,
        carried_norm=None,
        param_norms=norms,
        update_ratios=norms if sampled else None,
        update_norm=0.01 * n if sampled else None,
        time_s=n * 1e-3,
    )


def _schedule(n: int, rng: random.Random) -> StepRecord:
    r = _plain(n, rng)
    return _with(r, lrs=(0.1 * (1 - n / 1e6), 0.01))  # both groups' rates change every step


def _clipped(n: int, rng: random.Random) -> StepRecord:
    r = _plain(n, rng)
    return _with(r, clipped_norm=min(1.0, r.grad_norm), max_norm=1.0, clip_total=r.grad_norm)


def _scaled(n: int, rng: random.Random) -> StepRecord:
    """GradScaler: the scale doubles every 2,000 steps and halves at an overflow."""
    skipped = n % 2000 == 1000
    return _with(_plain(n, rng), scale=2.0 ** (16 + (n % 2000 > 1000)), skipped=skipped)


def _two_optimizers(n: int, rng: random.Random) -> StepRecord:
    """A GAN: D and G step in turn, each counting its own steps."""
    r = _plain((n + 1) // 2, rng)
    return _with(r, optimizer=n % 2, time_s=n * 1e-3)


def _with(r: StepRecord, **changes) -> StepRecord:
    return StepRecord.stored({**vars(r), **changes})


# (run, the numbers that change at every step: loss, gradient norm, time, and its own)
RUNS: dict[str, tuple[Callable[[int, random.Random], StepRecord], int]] = {
    "plain": (_plain, 3),
    "lr schedule": (_schedule, 3 + 3),  # two rates, and where they start
    "clipped": (_clipped, 3 + 2),  # the clipped norm and the script's total
    "GradScaler": (_scaled, 3),
    "two optimizers": (_two_optimizers, 3 + 2),  # whose step, and its number
}


@pytest.mark.parametrize("name", RUNS)
def test_a_long_run_keeps_the_floats_that_change_per_step(name):
    """8,000 steps read back in tens as the recorder does; what the second half adds,
    per step, traced and by the store's own count: 8 bytes a changing number (and the
    arrays' headroom), not one number of each of the store's 20 fields (119 B)."""
    make, changing = RUNS[name]
    rng = random.Random(0)
    store = StepStore(detail_steps=64)
    tracemalloc.start()  # from the start: an array reallocated later counts whole
    try:
        for first in range(1, STEPS + 1, 10):
            store.extend([make(n, rng) for n in range(first, first + 10)])
            if first + 9 == STEPS // 2:
                gc.collect()
                half, _ = tracemalloc.get_traced_memory()
                counted = store.nbytes()
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    per_step = (kept - half) / (STEPS // 2)
    by_count = (store.nbytes() - counted) / (STEPS // 2)
    bound = 8 * changing * 1.15
    assert per_step <= bound, f"{per_step:.1f} B kept per step, bound {bound:.0f}"
    assert by_count <= bound, f"{by_count:.1f} B per step in the columns, bound {bound:.0f}"
    assert len(store) == STEPS


@pytest.mark.parametrize("name", RUNS)
def test_every_step_of_a_long_run_reads_back_as_recorded(name):
    make, _ = RUNS[name]
    rng = random.Random(1)
    records = [make(n, rng) for n in range(1, 3001)]
    store = StepStore(detail_steps=10**6)
    for first in range(0, len(records), 7):
        store.extend(records[first : first + 7])
    assert len(store) == len(records)
    assert all(_same(a, b) for a, b in zip(records, store, strict=True))
    with store.held():
        assert all(_same(a, b) for a, b in zip(records, store, strict=True))
    picks = random.Random(2).sample(range(len(records)), 200)
    assert all(_same(store[i], records[i]) for i in picks)  # out of order
    assert _same(store[-1], records[-1])


def test_a_column_reads_back_every_value_in_runs_and_once_dense():
    """NaN equals NaN (a missing value), -0.0 is not 0.0, and a column that changes at
    most steps turns into one value a step."""
    values = [1.0, 1.0, math.nan, math.nan, -0.0, 0.0, 0.0, math.inf, 2.5, 2.5]
    values += [float(k // 50) for k in range(512)]  # long runs
    column = StepColumn()
    column.extend(values[:3])
    for v in values[3:]:
        column.append(v)
    assert not column._dense and len(column._values) == 6 + len({k // 50 for k in range(512)})
    rng = random.Random(3)
    changing = [rng.random() for _ in range(2 * len(values))]
    column.extend(changing)
    assert column._dense
    every = values + changing
    assert len(column) == len(every)
    got = [column[i] for i in range(len(every))]
    assert all(_bits(a) == _bits(b) for a, b in zip(got, every, strict=True))
    assert all(_bits(a) == _bits(b) for a, b in zip(column.values(), every, strict=True))
    assert _bits(column[-1]) == _bits(every[-1])


def test_a_batch_of_negative_zeros_does_not_extend_a_run_of_zeros():
    column = StepColumn()
    column.extend([0.0, 0.0])
    column.extend([0.0, -0.0])
    column.extend([1.5, 1.5])
    column.extend([1.5, 1.5])
    signs = [math.copysign(1.0, column[i]) for i in range(4)]
    assert signs == [1.0, 1.0, 1.0, -1.0] and column[7] == 1.5 and len(column) == 8


def test_a_column_of_runs_reads_in_any_order():
    every = [k // 7 for k in range(500)]
    column = StepColumn("q")
    column.extend(every)
    assert not column._dense and len(column._values) == len(set(every))
    order = list(range(len(every)))
    random.Random(4).shuffle(order)
    assert [column[i] for i in order] == [every[i] for i in order]
    assert column[-1] == every[-1]
    with pytest.raises(IndexError):
        column[len(every)]


def test_a_store_without_steps_has_no_optimizer():
    store = StepStore()
    assert len(store) == 0 and store.optimizers() == set() and store.of_optimizer(0) == []
    assert list(store) == [] and store.nbytes() > 0


def _bits(v: float) -> tuple[bool, float, float]:
    return (v != v, 0.0 if v != v else v, math.copysign(1.0, v))
