"""The lr schedulers a script steps: how often, against its optimizers' steps, and from
where. One dict update per scheduler.step() call and no device read; the scheduler's
own numbers and the script's line are read at its first call only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradscope.errors import user_line
from gradscope.steps.meaning import SchedulerInfo

SETTINGS = (
    "step_size",
    "milestones",
    "gamma",
    "T_max",
    "T_0",
    "eta_min",
    "total_steps",
    "total_iters",
    "factor",
    "patience",
    "power",
)
"""The constructor arguments a scheduler keeps as attributes under these names: the
schedule's length and its rate, as the message names them."""


@dataclass
class Calls:
    """One scheduler's calls since its optimizer's first step."""

    scheduler: Any
    kind: str
    settings: str
    site: str | None
    first: int
    last: int
    calls: int = 0


def stepped(state: Any, scheduler: Any) -> None:
    """scheduler.step() was called (the outermost call: SequentialLR's own children are
    not counted). Calls before its optimizer's first step (the one every scheduler makes
    when it is built) are not the schedule's pace."""
    optimizer = getattr(scheduler, "optimizer", None)
    if optimizer is None or state.index_of(optimizer) < 0:
        return
    entry = state.schedulers.get(id(scheduler))
    if entry is None or entry.scheduler is not scheduler:
        entry = state.schedulers[id(scheduler)] = Calls(
            scheduler,
            type(scheduler).__name__,
            _settings(scheduler),
            user_line(),
            state.steps,
            state.steps,
        )
    entry.calls += 1
    entry.last = state.steps


def _settings(scheduler: Any) -> str:
    parts = []
    for name in SETTINGS:
        value = getattr(scheduler, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(f"{name}={value:g}")
        elif name == "milestones" and isinstance(value, dict | list | tuple | set) and value:
            parts.append(f"milestones={sorted(value)}")
    return ", ".join(parts)


def infos(state: Any) -> tuple[SchedulerInfo, ...]:
    """Each scheduler the run stepped, for the WatchRun."""
    return tuple(
        SchedulerInfo(
            c.kind,
            c.settings,
            state.index_of(getattr(c.scheduler, "optimizer", None)),
            c.calls,
            c.first,
            c.last,
            c.site,
        )
        for c in state.schedulers.values()
    )
