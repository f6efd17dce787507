"""Gradients the backward filled that the script set to None before the optimizer's step:
a layer frozen by dropping its gradient (DINO's cancel_gradients_last_layer in its first
epoch). Where that lasts the whole run, the parameter got no gradient at any step, and
its graph is not cut: the drop is what stops it.

At the end of the last backward before the sampled steps (1-3, then pairs every 25,
every 500 after step 101) the tracked parameters holding a gradient are kept (`p.grad is
not None`: host checks, no device read); at the step's start, those holding none any
more are counted. Only while one thread has run the watch's hooks: the tracked tensors
are every model's, and another thread's backward writes its gradients without the GIL
(reading one then crashed a run that trains two models in two threads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradscope.watcher.same_batch import wanted


@dataclass
class DroppedGrads:
    held: list[Any] = field(default_factory=list)
    """The tracked parameters holding a gradient at the end of the last backward (at a
    sampled step)."""
    dropped: dict[int, int] = field(default_factory=dict)
    """Tracked position → sampled steps at whose start its gradient was gone."""
    sampled: int = 0

    def backward_ended(self, params: list[Any], step: int) -> None:
        """A backward of optimizer step `step` returned."""
        if wanted(step):
            self.held = [p for p in params if p.grad is not None]

    def step_starts(self, index: dict[int, int]) -> None:
        """An optimizer's step starts: the gradients kept since the backward, now gone."""
        if not self.held:
            return
        self.sampled += 1
        for p in self.held:
            at = index.get(id(p))
            if at is not None and p.grad is None:
                self.dropped[at] = self.dropped.get(at, 0) + 1
        self.held = []

    def facts(self) -> tuple[int, ...]:
        """Tracked positions whose gradient was dropped at every sampled step."""
        return tuple(sorted(i for i, n in self.dropped.items() if n == self.sampled))
