"""Parameters an optimizer steps that the script also moves by hand between its steps,
while gradients reach them: an EMA teacher left in the optimizer with its forward attached
(BYOL, DINO, Mean Teacher without no_grad), a weight clipped or renormalised in place.

torch bumps a tensor's version counter at every in-place write (`mul_`, `add_`,
`copy_`, `lerp_` under no_grad); a backward that fills `.grad` and a zero_grad do not. At
the steps same_batch reads (1-3, then pairs every 25, every 500 after step 101) the
versions of an optimizer's parameters are kept after its step and compared at its next
step's start: host counters, no device read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gradscope.watcher.same_batch import wanted


@dataclass
class HandMoved:
    kept: dict[int, tuple[list[Any], list[int]]] = field(default_factory=dict)
    """id(optimizer) → (its parameters, their versions after its last sampled step)."""
    moved: dict[int, int] = field(default_factory=dict)
    """Tracked position → intervals between its optimizer's steps in which the script wrote
    it in place while it held a gradient."""
    owner: dict[int, int] = field(default_factory=dict)
    """Tracked position → id of the optimizer whose intervals it was compared over."""
    compared: dict[int, int] = field(default_factory=dict)
    """id(optimizer) → intervals between its steps compared (a GAN's two optimizers each
    count their own)."""

    def after_step(self, optimizer: Any, step: int) -> None:
        """Optimizer step `step` ended: keep its parameters' versions when the next one is
        read."""
        if not wanted(step + 1):
            return
        params = [p for g in optimizer.param_groups for p in g["params"]]
        self.kept[id(optimizer)] = (params, [p._version for p in params])

    def before_step(self, optimizer: Any, index: dict[int, int]) -> None:
        """The optimizer's next step starts: its parameters written since, with a gradient."""
        key = id(optimizer)
        kept = self.kept.pop(key, None)
        if kept is None:
            return
        self.compared[key] = self.compared.get(key, 0) + 1
        for p, version in zip(*kept, strict=True):
            at = index.get(id(p))
            if at is not None and p._version != version and p.grad is not None:
                self.moved[at] = self.moved.get(at, 0) + 1
                self.owner[at] = key

    def written(self) -> tuple[int, ...]:
        """Tracked positions the script wrote in place while they held a gradient, in one
        interval compared at least (a target network synced from the model every N steps)."""
        return tuple(sorted(self.moved))

    def facts(self) -> tuple[tuple[int, ...], int]:
        """(tracked positions moved by hand at every interval their optimizer compared, the
        fewest intervals among those optimizers; with none, the most any compared)."""
        if not self.compared:
            return (), 0
        every = tuple(sorted(i for i, n in self.moved.items() if n == self.compared[self.owner[i]]))
        if not every:
            return (), max(self.compared.values())
        return every, min(self.compared[self.owner[i]] for i in every)
