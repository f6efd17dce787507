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

from gradscope.steps.detail import NO_GRAD


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
    """One optimizer's per-tensor running facts.

    Only changes cost work: a tensor in a run of steps with gradients (the usual state)
    is described by where the run began and the latest row; its counts are written out
    when the run ends (a step without gradient) and counted on while it has none. A
    step costs one pass over its norms (in C when every tensor had a gradient) and work
    in proportion to the tensors without one."""

    def __init__(self) -> None:
        self.live = 0
        self.latest_step = -1
        self.latest_row = array("d")
        self.width = 0
        self.outs: set[int] = set()
        """Tensors without a gradient at the latest step (or none yet)."""
        self.ever: list[bool] = []
        self.run_start: list[int] = []
        """Where its current run of steps with gradients began (live position)."""
        self.had_before: list[int] = []
        """Its steps with gradients before that run."""
        self.gap: list[int] = []
        # written when a run ends, valid while the tensor is out:
        self.had: list[int] = []
        self.last: list[int] = []
        self.last_step: list[int] = []
        self.last_value: list[float] = []
        self.since: list[int] = []
        self.none_after: list[int] = []
        self.zero_after: list[int] = []

    def widen(self, width: int) -> None:
        grow = width - self.width
        if grow <= 0:
            return
        self.outs.update(range(self.width, width))
        self.ever += [False] * grow
        for column in (self.run_start, self.had_before, self.gap, self.had):
            column += [0] * grow
        for column in (self.last, self.last_step, self.since):
            column += [-1] * grow
        self.none_after += [0] * grow
        self.zero_after += [0] * grow
        self.last_value += [0.0] * grow
        self.width = width

    def add(self, step: int, norms: array) -> set[int]:
        """One live step; returns the tensors that had no gradient in it."""
        at, n = self.live, len(norms)
        missing = (  # None (-1) or zeros; NaN had one. min() > 0: none missing (fast, in C)
            [] if n and min(norms) > 0 else [i for i, v in enumerate(norms) if v <= 0]
        )
        missing.extend(range(n, self.width))
        out = set(missing)
        for i in self.outs - out:  # a run of steps with gradients begins
            if self.ever[i]:
                self.gap[i] = max(self.gap[i], at - self.last[i] - 1)
                self.had_before[i] = self.had[i]
            else:
                self.ever[i] = True
            self.run_start[i] = at
        for i in missing:
            if i not in self.outs and self.ever[i]:  # its run ended at the previous step
                self.had[i] = self.had_before[i] + at - self.run_start[i]
                self.last[i] = at - 1
                self.last_step[i] = self.latest_step
                self.last_value[i] = self.latest_row[i]
                self.since[i] = step
                self.none_after[i] = self.zero_after[i] = 0
            if self.ever[i]:
                if i >= n or norms[i] == NO_GRAD:
                    self.none_after[i] += 1
                else:
                    self.zero_after[i] += 1
        self.outs = out
        self.live += 1
        self.latest_step = step
        self.latest_row = norms
        return out

    def learned(self, i: int) -> Learned | None:
        if i >= self.width or not self.ever[i]:
            return None
        if i in self.outs:
            return Learned(
                self.had[i],
                self.last[i],
                self.last_step[i],
                self.last_value[i],
                self.gap[i],
                self.since[i],
                self.none_after[i],
                self.zero_after[i],
            )
        had = self.had_before[i] + self.live - self.run_start[i]
        value = self.latest_row[i]
        return Learned(had, self.live - 1, self.latest_step, value, self.gap[i], -1, 0, 0)


class TensorTrack:
    """Running per-tensor facts of a run, by optimizer (lane) and over the whole run."""

    def __init__(self) -> None:
        self.width = 0
        self._lanes: dict[int, _Lane] = {}
        self._never_grad: set[int] = set()
        """Tensors no live step of any optimizer gave a gradient (not None, not zeros)."""
        self._never_seen: set[int] = set()
        """Tensors whose grad was None at every live step (zeros count as seen)."""

    def add(self, step: int, optimizer: int, norms: array) -> None:
        """One live step: `norms` per tensor, NO_GRAD where grad was None."""
        if len(norms) > self.width:
            fresh = range(self.width, len(norms))
            self._never_grad.update(fresh)
            self._never_seen.update(fresh)
            self.width = len(norms)
        lane = self._lanes.get(optimizer)
        if lane is None:
            lane = self._lanes[optimizer] = _Lane()
        lane.widen(self.width)
        out = lane.add(step, norms)
        if self._never_grad:
            self._never_grad &= out
        if self._never_seen:
            n = len(norms)
            self._never_seen = {i for i in self._never_seen if i >= n or norms[i] == NO_GRAD}

    def live_steps(self, optimizer: int) -> int:
        lane = self._lanes.get(optimizer)
        return lane.live if lane else 0

    def learned(self, optimizer: int, i: int) -> Learned | None:
        """Tensor i under that optimizer; None when it never had a gradient there."""
        lane = self._lanes.get(optimizer)
        return lane.learned(i) if lane is not None else None

    def got_grad(self, i: int) -> bool:
        """A live step gave tensor i a gradient (not None, not all zeros)."""
        return i < self.width and i not in self._never_grad

    def ever_had_grad(self, i: int) -> bool:
        """A live step gave tensor i a grad, zeros included (not always None)."""
        return i < self.width and i not in self._never_seen
