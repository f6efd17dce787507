"""Did a run train at all? Judged on each run by itself, never against the other.

Two runs that agree within a loose tolerance can both be flat (a learning rate of 0, a
step() on the wrong model): agreement says nothing about learning. A run trained when
its weights moved and its loss fell: the median loss over the last steps at least
MIN_FALL below where it started (the higher of the first 5 and the first window's
medians, as watch's GS415). A positive loss that ended an order of magnitude or more
above its first value did not fail to converge: it blew up (said from where it really
started, its first logged value). With several optimizers (a GAN) the losses are
adversarial and only the weights are judged.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gradscope import fmt
from gradscope.diff.runs.log import Step

MIN_FALL = 0.05
"""The loss must end at least this fraction below its start (watch's progress-min-fall)."""
MIN_STEPS = 20
"""Fewer logged losses than this: too short to judge the loss (the weights still are)."""
BLEW_UP = 10.0
"""A positive loss whose last median is this many times its first value or more rose by an
order of magnitude: the run diverged."""


@dataclass(frozen=True)
class Training:
    run: str
    """"ref" or "new"."""
    optimizer: int
    steps: int
    trained: bool | None
    """None: too short to tell."""
    moved: bool | None
    """The weights changed (an update norm > 0 on a sampled step, or a learning rate > 0
    where none was sampled); None: unknown."""
    fall: float | None
    """(start - end) / |start| of the median loss; None when not judged."""
    why: str
    blew_up: bool = False
    """The loss rose by an order of magnitude or more from its first value."""

    def to_dict(self) -> dict[str, object]:
        return {
            "run": self.run,
            "optimizer": self.optimizer,
            "steps": self.steps,
            "trained": self.trained,
            "weights_moved": self.moved,
            "loss_fall": self.fall,
            "loss_blew_up": self.blew_up,
            "why": self.why,
        }


def _window(n: int) -> int:
    return max(5, min(50, n // 5))


def _moved(steps: Sequence[Step]) -> tuple[bool | None, str]:
    updates = [s.update_norm for s in steps if s.update_norm is not None]
    if updates:
        if any(u > 0 for u in updates if math.isfinite(u)):
            return True, ""
        return False, f"the weights never moved (update norm 0 at all {len(updates)} sampled steps)"
    lrs = [lr for s in steps for lr in s.lrs]
    if lrs and all(lr == 0 for lr in lrs):
        return False, "the learning rate is 0 at every step"
    return (True if lrs else None), ""


def _blew_up(steps: Sequence[Step], last: float, window: int) -> str:
    """Where the loss started (its first logged value) and where it went, when it rose by
    BLEW_UP times or more; "" otherwise."""
    start = next(s for s in steps if s.loss is not None and math.isfinite(s.loss))
    assert start.loss is not None
    if start.loss <= 0 or last < BLEW_UP * start.loss:
        return ""
    return (
        f"the loss blew up: it started at {fmt.num(start.loss)} (step {start.step}) and went "
        f"to {fmt.num(last)} (median of the last {window} steps), ×{fmt.num(last / start.loss)}"
    )


def judge(run: str, optimizer: int, steps: Sequence[Step], several: bool) -> Training:
    moved, reason = _moved(steps)
    if moved is False:
        return Training(run, optimizer, len(steps), False, False, None, reason)
    losses = [s.loss for s in steps if s.loss is not None and math.isfinite(s.loss)]
    if several:
        return Training(run, optimizer, len(steps), moved, moved, None, "weights moved")
    if len(losses) < MIN_STEPS:
        return Training(
            run, optimizer, len(steps), None, moved, None,
            f"too short to judge the loss ({len(losses)} finite losses, {MIN_STEPS} needed)",
        )  # fmt: skip
    w = _window(len(losses))
    first = max(statistics.median(losses[:5]), statistics.median(losses[:w]))
    last = statistics.median(losses[-w:])
    blown = _blew_up(steps, last, w)
    if blown:
        fall = (first - last) / abs(first) if first else None
        return Training(run, optimizer, len(steps), False, moved, fall, blown, blew_up=True)
    if first == 0:
        return Training(run, optimizer, len(steps), None, moved, None, "the loss starts at 0")
    fall = (first - last) / abs(first)
    said = f"median loss {fmt.num(first)} → {fmt.num(last)} ({-fall:+.1%})"
    if fall >= MIN_FALL:
        return Training(run, optimizer, len(steps), True, moved, fall, said)
    return Training(
        run, optimizer, len(steps), False, moved, fall,
        f"the loss did not fall: {said}, less than {MIN_FALL:.0%}",
    )  # fmt: skip
