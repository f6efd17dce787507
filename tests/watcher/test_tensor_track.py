"""TensorTrack's running per-tensor facts equal the same facts counted over every step's
stored norms (what GS411/GS413/GS417 used to read), on random runs with None, zeros,
NaN, skipped steps, two optimizers and tensors that appear later."""

from __future__ import annotations

import itertools
import math
import random
from array import array

import pytest

from gradscope.steps.detail import NO_GRAD
from gradscope.steps.tensor_track import Learned, TensorTrack


def _had(v: float | None) -> bool:
    return v is not None and v != 0


def _counted(steps, optimizer: int, i: int) -> Learned | None:
    """Straight from the series, as stopped_learning read it."""
    live = [(n, norms) for n, o, skipped, norms in steps if o == optimizer and not skipped]
    vals = [norms[i] if i < len(norms) else None for _, norms in live]
    had = [k for k, v in enumerate(vals) if _had(v)]
    if not had:
        return None
    rest = vals[had[-1] + 1 :]
    gaps = [b - a - 1 for a, b in itertools.pairwise(had)]
    return Learned(
        had=len(had),
        last=had[-1],
        last_step=live[had[-1]][0],
        last_value=vals[had[-1]],  # type: ignore[arg-type]
        longest_gap=max(gaps, default=0),
        since_step=live[had[-1] + 1][0] if rest else -1,
        none_after=sum(v is None for v in rest),
        zero_after=sum(v is not None for v in rest),
    )


def _random_run(seed: int):
    rng = random.Random(seed)
    steps = []
    width = 3
    kinds = [rng.choice(("steady", "flaky", "stops", "never", "zeros")) for _ in range(8)]
    for n in range(1, 400):
        if n == 150:
            width = 8  # tensors tracked later (a module built mid-run)
        norms: list[float | None] = []
        for i in range(width):
            kind = kinds[i]
            if kind == "never":
                v = None
            elif kind == "stops" and n > 250:
                v = rng.choice((None, 0.0))
            elif kind == "zeros" and n > 300:
                v = 0.0
            elif kind == "flaky" and rng.random() < 0.3:
                v = rng.choice((None, 0.0))
            else:
                v = math.nan if rng.random() < 0.01 else rng.random() + 0.1
            norms.append(v)
        steps.append((n, n % 3 == 0, rng.random() < 0.05, norms))  # GAN-like: 2 optimizers
    return [(n, int(o), skipped, norms) for n, o, skipped, norms in steps]


@pytest.mark.parametrize("seed", range(6))
def test_running_facts_equal_the_facts_counted_over_every_step(seed):
    steps = _random_run(seed)
    track = TensorTrack()
    for n, optimizer, skipped, norms in steps:
        if not skipped:
            row = array("d", [NO_GRAD if v is None else v for v in norms])
            track.add(n, optimizer, row)
    for optimizer, i in itertools.product((0, 1), range(8)):
        want = _counted(steps, optimizer, i)
        got = track.learned(optimizer, i)
        if want is None or got is None:
            assert want == got
            continue
        nan_both = math.isnan(want.last_value) and math.isnan(got.last_value)
        assert got == want or (
            nan_both and {**vars(got), "last_value": 0} == {**vars(want), "last_value": 0}
        )
    for i in range(8):
        values = [norms[i] for _, _, skipped, norms in steps if not skipped and i < len(norms)]
        assert track.got_grad(i) == any(_had(v) for v in values)
        assert track.ever_had_grad(i) == any(v is not None for v in values)
