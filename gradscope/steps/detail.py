"""Per-tensor rows of a watched run kept at a bounded resolution. No torch.

A run of a million steps over a model of hundreds of tensors cannot keep every step's
per-tensor gradient norms: the report and the plot keep them for at most `capacity` steps
per optimizer (per lane), by decimation: every step while there is room, then every
second, fourth, ... step (the stride doubles each time the lane is full, and the rows off
the new grid are dropped). Always kept besides the grid: the first step of each lane (it
is on every grid), its latest step (replaced as the run moves on) and the pinned steps
(the first non-finite step, and the steps whose gradient norm jumped most above its
recent median: step_store.py). So a lane holds at most capacity + 2 rows plus the pins,
whatever the length of the run; the --log stream has every step in full.

Rows are `array('d')`: gradient norms with NO_GRAD (-1) where grad was None, and on
sampled steps the update/weight ratios (NaN where not measured).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

DETAIL_STEPS = 1024
"""Default bound: steps per optimizer whose per-tensor detail the report keeps."""

NO_GRAD = -1.0


@dataclass(slots=True)
class Row:
    norms: array
    """Per tensor: gradient norm, NO_GRAD where grad was None."""
    ratios: array | None = None
    """Sampled steps: per tensor ‖Δw‖/‖w‖, NaN where not measured."""


@dataclass
class _Lane:
    seen: int = 0
    """Steps offered so far."""
    stride: int = 1
    grid: list[tuple[int, int]] = field(default_factory=list)
    """(arrival number, store index) of the rows kept on the grid."""
    last: int = -1
    """Store index of the latest row."""


class Decimated:
    """Rows by store index, at most `capacity` on each lane's grid (see the module doc)."""

    def __init__(self, capacity: int = DETAIL_STEPS) -> None:
        self.capacity = max(2, capacity)
        self.rows: dict[int, Row] = {}
        self.pinned: set[int] = set()
        self._lanes: dict[int, _Lane] = {}

    def offer(self, index: int, lane_key: int, row: Row, pin: bool = False) -> None:
        lane = self._lanes.setdefault(lane_key, _Lane())
        if lane.last >= 0:
            self._drop_if_unkept(lane, lane.last, newest=index)
        self.rows[index] = row
        lane.last = index
        if pin:
            self.pinned.add(index)
        if lane.seen % lane.stride == 0:
            lane.grid.append((lane.seen, index))
            if len(lane.grid) > self.capacity:
                self._thin(lane)
        lane.seen += 1

    def _thin(self, lane: _Lane) -> None:
        """Double the stride; rows off the new grid go (unless pinned or the latest)."""
        lane.stride *= 2
        kept = []
        for arrival, index in lane.grid:
            if arrival % lane.stride == 0:
                kept.append((arrival, index))
            elif index not in self.pinned and index != lane.last:
                self.rows.pop(index, None)
        lane.grid = kept

    def unpin(self, index: int) -> None:
        """The row goes, unless the grid keeps it or it is its lane's latest."""
        self.pinned.discard(index)
        for lane in self._lanes.values():
            if index == lane.last or any(i == index for _, i in lane.grid):
                return
        self.rows.pop(index, None)

    def _drop_if_unkept(self, lane: _Lane, index: int, newest: int) -> None:
        """The previous latest row goes unless the grid or a pin keeps it."""
        if index in self.pinned or newest == index:
            return
        if lane.grid and lane.grid[-1][1] == index:
            return
        self.rows.pop(index, None)

    def stride(self, lane_key: int) -> int:
        lane = self._lanes.get(lane_key)
        return lane.stride if lane else 1
