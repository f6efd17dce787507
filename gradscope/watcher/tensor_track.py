"""Per-tensor facts over every step of a run, updated as each step arrives. No torch.

The per-tensor series themselves are kept at a bounded resolution (detail.py); the rules
that judge a tensor over all steps (it never got a gradient: GS411/GS413; it stopped
getting one: GS417) read these running aggregates instead, so their verdicts do not
depend on how many steps were kept. Memory: a few numbers per tensor and optimizer,
none per step.

"Had a gradient" is a norm that is not None and not 0 (NaN counts: it had one).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from gradscope.watcher.detail import NO_GRAD


@dataclass(frozen=True)
class Learned:
    """One tensor's gradients over one optimizer's live (not skipped) steps."""

    had: int
    """Live steps with a gradient."""
    last: int
    """0-based position among the live steps of the last one with a gradient."""
    last_step: int
    last_value: float
    longest_gap: int
    """Most live steps in a row without a gradient between two with one."""
    since_step: int
    """The first live step after `last` (-1: none yet)."""
    none_after: int
    """Live steps after `last` whose grad was None..."""
    zero_after: int
    """...and those whose gradient was all zeros."""


class _Lane:
    """One optimizer's per-tensor running facts, in parallel arrays."""

    def __init__(self) -> None:
        self.live = 0
        self.had = array("q")
        self.last = array("q")
        self.last_step = array("q")
        self.last_value = array("d")
        self.gap = array("q")
        self.since = array("q")
        self.none_after = array("q")
        self.zero_after = array("q")

    def widen(self, width: int) -> None:
        grow = width - len(self.had)
        if grow <= 0:
            return
        for column, filler in (
            (self.had, 0),
            (self.last, -1),
            (self.last_step, -1),
            (self.gap, 0),
            (self.since, -1),
            (self.none_after, 0),
            (self.zero_after, 0),
        ):
            column.extend([filler] * grow)
        self.last_value.extend([0.0] * grow)


class TensorTrack:
    """Running per-tensor facts of a run, by optimizer (lane) and over the whole run."""

    def __init__(self) -> None:
        self.width = 0
        self._lanes: dict[int, _Lane] = {}
        self._got_grad = bytearray()
        """Per tensor: a live step of any optimizer gave it a gradient."""
        self._seen = bytearray()
        """Per tensor: a live step of any optimizer gave it a grad, zeros included."""

    def add(self, step: int, optimizer: int, norms: array) -> None:
        """One live step: `norms` per tensor, NO_GRAD where grad was None."""
        width = max(self.width, len(norms))
        if width > self.width:
            self._got_grad.extend(bytes(width - self.width))
            self._seen.extend(bytes(width - self.width))
            self.width = width
        lane = self._lanes.get(optimizer)
        if lane is None:
            lane = self._lanes[optimizer] = _Lane()
        lane.widen(width)
        at = lane.live
        lane.live += 1
        n = len(norms)
        for i in range(width):
            v = norms[i] if i < n else NO_GRAD
            if v == NO_GRAD or v == 0:
                if lane.had[i]:
                    if v == NO_GRAD:
                        lane.none_after[i] += 1
                    else:
                        lane.zero_after[i] += 1
                    if lane.since[i] < 0:
                        lane.since[i] = step
                if v == 0:
                    self._seen[i] = 1
                continue
            last = lane.last[i]
            if last >= 0 and at - last - 1 > lane.gap[i]:
                lane.gap[i] = at - last - 1
            lane.had[i] += 1
            lane.last[i] = at
            lane.last_step[i] = step
            lane.last_value[i] = v
            lane.since[i] = -1
            lane.none_after[i] = 0
            lane.zero_after[i] = 0
            self._got_grad[i] = 1
            self._seen[i] = 1

    def live_steps(self, optimizer: int) -> int:
        lane = self._lanes.get(optimizer)
        return lane.live if lane else 0

    def learned(self, optimizer: int, i: int) -> Learned | None:
        """Tensor i under that optimizer; None when it never had a gradient there."""
        lane = self._lanes.get(optimizer)
        if lane is None or i >= len(lane.had) or not lane.had[i]:
            return None
        return Learned(
            lane.had[i],
            lane.last[i],
            lane.last_step[i],
            lane.last_value[i],
            lane.gap[i],
            lane.since[i],
            lane.none_after[i],
            lane.zero_after[i],
        )

    def got_grad(self, i: int) -> bool:
        """A live step gave tensor i a gradient (not None, not all zeros)."""
        return i < self.width and bool(self._got_grad[i])

    def ever_had_grad(self, i: int) -> bool:
        """A live step gave tensor i a grad, zeros included (not always None)."""
        return i < self.width and bool(self._seen[i])
