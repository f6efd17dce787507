"""`LRScheduler.step` and the subclasses that define their own (ReduceLROnPlateau,
SequentialLR, ...): how often the script steps its schedule (schedules.py)."""

from __future__ import annotations

from typing import Any

from torch.optim import lr_scheduler

from gradscope.watcher import schedules
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

PART = "the lr scheduler hook"


def scheduler_classes() -> list[type]:
    """torch's LRScheduler and each of its own classes that defines `step`."""
    base = lr_scheduler.LRScheduler
    found: list[type] = [base]
    for value in vars(lr_scheduler).values():
        if isinstance(value, type) and issubclass(value, base) and value is not base:
            if "step" in vars(value) and value not in found:
                found.append(value)
    return found


class SchedulerStep(Patch):
    name = "step"

    def wrap(self, original: Any) -> Any:
        state = self.state

        def step(scheduler: Any, *args: Any, **kw: Any) -> Any:
            here = enter(state)
            if here is None or here.scheduling:
                return original(scheduler, *args, **kw)
            safely(state, here, PART, lambda: schedules.stepped(state, scheduler))
            here.scheduling = True
            try:
                return original(scheduler, *args, **kw)
            finally:
                here.scheduling = False

        return step


def scheduler_patches(state: WatchState) -> list[SchedulerStep]:
    return [SchedulerStep(state, cls) for cls in scheduler_classes()]
