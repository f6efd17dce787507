"""The lr schedulers a script steps: how often, against its optimizers' steps, and from
where. One dict update per scheduler.step() call and no device read; the scheduler's
own numbers and the script's line are read at its first call only."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from types import FrameType
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
    stepper: str
    first: int
    last: int
    calls: int = 0
    shape: str = ""
    horizon: int | None = None
    past: int | None = None


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
            _stepper(),
            state.steps,
            state.steps,
        )
        entry.shape, entry.horizon = _shape(scheduler)
    entry.calls += 1
    entry.last = state.steps
    if entry.past is None and entry.horizon is not None:
        if getattr(scheduler, "last_epoch", -1) >= entry.horizon:  # this call goes past it
            entry.past = state.steps + 1


LIGHTNING = ("/lightning/pytorch/", "/pytorch_lightning/")
"""Where Lightning's loop lives: a scheduler it steps follows configure_optimizers'
`"interval"`, not a `step()` call in the script."""


def _stepper() -> str:
    """ "lightning" where the code that called scheduler.step() (the first frame outside
    gradscope and torch's schedulers) is Lightning's loop; "" for the script's own call."""
    frame: FrameType | None = sys._getframe(1)
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(ours) and not name.endswith("lr_scheduler.py"):
            return "lightning" if any(p in name.replace(os.sep, "/") for p in LIGHTNING) else ""
        frame = frame.f_back
    return ""


FALLS = ("StepLR", "MultiStepLR", "ExponentialLR")
"""Schedules whose lr only falls (gamma < 1): once below 1% of its peak it stays there."""
ENDS = {"CosineAnnealingLR": "T_max", "LinearLR": "total_iters", "PolynomialLR": "total_iters"}
"""Schedules sized in calls: their lr reaches its end value at this many calls (a cosine
then climbs back; the others stay there)."""


def _shape(scheduler: Any) -> tuple[str, int | None]:
    """Where the schedule takes the lr, from its class and numbers: "falls" (and stays
    down), "ends" after `horizon` calls (OneCycleLR: its last step; it cannot go past),
    or "" (a lambda, a composite, a plateau: not known beforehand)."""
    kind = type(scheduler).__name__
    gamma = getattr(scheduler, "gamma", None)
    if kind in FALLS and isinstance(gamma, int | float) and gamma < 1:
        return "falls", None
    length = getattr(scheduler, ENDS.get(kind, "total_steps" if kind == "OneCycleLR" else ""), None)
    if isinstance(length, int) and not isinstance(length, bool) and length > 0:
        return "ends", length - 1 if kind == "OneCycleLR" else length
    return "", None


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
            c.shape,
            c.horizon,
            c.past,
            c.stepper,
        )
        for c in state.schedulers.values()
    )
