"""Per-tensor gradient spikes, each tensor against its own recent history. No torch.

A batch that fills a normally empty input column makes one layer's gradient jump 100×
while the total norm moves only 4-12×: judged on the total, the jump is hidden or
unnamed. `LayerSpikes` keeps, per optimizer, a ring of the last WINDOW steps' per-tensor
norms and their medians (refreshed every REFRESH steps, so a step costs one comparison
per tensor), and checks a tensor against its exact median only where it passed CANDIDATE
times the cached one. It keeps the KEPT largest jumps per optimizer: bounded memory
whatever the run's length, every step seen (the decimated detail would miss one).
"""

from __future__ import annotations

import bisect
import heapq
import math
import statistics
from array import array
from collections import deque
from dataclasses import dataclass, field, replace
from itertools import compress, islice
from operator import gt

WINDOW = 64
"""Steps of history each tensor is judged against."""
MIN_HISTORY = 16
"""Steps a lane must have seen before a jump is judged."""
REFRESH = 64
"""Steps between refreshes of the cached per-tensor medians."""
CANDIDATE = 8.0
"""A norm this many times its tensor's cached median is checked against the exact one."""
KEPT = 32
"""Largest jumps kept per optimizer."""
FOLLOW = MIN_HISTORY
"""Steps after a kept jump whose norms of that tensor are kept: whether the jump stayed."""


@dataclass(frozen=True, order=True)
class LayerSpike:
    """One tensor's gradient norm far above its own recent median at one step."""

    ratio: float
    """value / median."""
    step: int
    tensor: int
    """Position in the run's params."""
    value: float
    median: float
    """The tensor's median norm over its last WINDOW steps before this one."""
    sigmas: float
    """The jump in robust sigmas of the tensor's log norm (inf where it never moved)."""
    over_high: float
    """value / the tensor's 90th percentile over the same steps: a tensor whose norm
    is often far above its median (a bimodal one) is not spiking when it is there."""
    total: float
    """The step's total gradient norm."""
    total_median: float
    """The total norm's median over the same steps."""
    after: float = math.nan
    """The tensor's median norm over the FOLLOW live steps after this one (nan: the run
    ended first): a jump that stayed is a level its gradient moved to, not a spike."""


@dataclass
class _Lane:
    rows: deque[array] = field(default_factory=lambda: deque(maxlen=WINDOW))
    totals: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    limits: list[float] = field(default_factory=list)
    """Per tensor: CANDIDATE × its cached median (inf: no history yet)."""
    seen: int = 0
    kept: list[LayerSpike] = field(default_factory=list)
    """Min-heap by ratio."""
    follow: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    """(step, tensor) of each kept jump → that tensor's norms at the steps after it."""


class LayerSpikes:
    """Every live step's per-tensor norms in, the largest per-tensor jumps out."""

    def __init__(self) -> None:
        self._lanes: dict[int, _Lane] = {}

    def add(self, step: int, optimizer: int, norms: array, total: float) -> None:
        """One live step: `norms` per tensor (negative where grad was None)."""
        lane = self._lanes.get(optimizer)
        if lane is None:
            lane = self._lanes[optimizer] = _Lane()
        for (_, i), after in lane.follow.items():
            if len(after) < FOLLOW and i < len(norms):
                after.append(norms[i])
        if lane.limits and any(map(gt, norms, lane.limits)):
            for i in compress(range(len(norms)), map(gt, norms, lane.limits)):
                if math.isfinite(norms[i]):
                    self._check(lane, step, i, norms[i], total)
        lane.rows.append(norms)
        if math.isfinite(total):
            lane.totals.append(total)
        lane.seen += 1
        if lane.seen == MIN_HISTORY or lane.seen % REFRESH == 0:
            lane.limits = [CANDIDATE * m if m > 0 else math.inf for m in _medians(lane.rows)]

    def _check(self, lane: _Lane, step: int, i: int, v: float, total: float) -> None:
        past = [math.log(r[i]) for r in lane.rows if i < len(r) and r[i] > 0]
        if len(past) < MIN_HISTORY:
            return
        med = statistics.median(past)
        mad = 1.4826 * statistics.median(abs(x - med) for x in past)
        jump = math.log(v) - med
        sigmas = jump / mad if mad > 0 else math.inf
        high = sorted(past)[(len(past) * 9) // 10]
        spike = LayerSpike(
            math.exp(jump),
            step,
            i,
            v,
            math.exp(med),
            sigmas,
            math.exp(math.log(v) - high),
            total,
            statistics.median(lane.totals) if lane.totals else math.nan,
        )
        if len(lane.kept) < KEPT:
            heapq.heappush(lane.kept, spike)
        elif spike > lane.kept[0]:
            gone = heapq.heapreplace(lane.kept, spike)
            lane.follow.pop((gone.step, gone.tensor), None)
        else:
            return
        lane.follow[(step, i)] = []

    def found(self, optimizer: int) -> list[LayerSpike]:
        """That optimizer's kept jumps, in step order."""
        lane = self._lanes.get(optimizer)
        if lane is None:
            return []
        return [
            _followed(s, lane.follow) for s in sorted(lane.kept, key=lambda s: (s.step, s.tensor))
        ]


def _followed(spike: LayerSpike, follow: dict[tuple[int, int], list[float]]) -> LayerSpike:
    """The jump with its tensor's median norm over the FOLLOW steps after it, where the run
    went on that long (no gradient at a step counts as 0)."""
    after = follow.get((spike.step, spike.tensor), [])
    if len(after) < FOLLOW:
        return spike
    return replace(spike, after=statistics.median(max(v, 0.0) for v in after))


def _medians(rows: deque[array]) -> list[float]:
    """Per tensor (up to the narrowest row), the median of its positive norms in every
    other row (0: none): a candidate's baseline, so half the rows do; columns sorted in C,
    the non-positive (no gradient, zeros) cut off."""
    out = []
    for column in zip(*islice(rows, 0, None, 2), strict=False):
        col = sorted(column)
        start = bisect.bisect_right(col, 0.0)
        out.append(col[(start + len(col)) // 2] if start < len(col) else 0.0)
    return out
