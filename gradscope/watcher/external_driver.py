"""Updates by hand that an optimizer outside torch makes: scipy.optimize.minimize
(L-BFGS-B, BFGS, SLSQP, trust-constr) calls the script's objective, which writes the
weights from scipy's vector and runs backward (botorch's `fit_gpytorch_mll`,
`botorch/optim/core.py: scipy_minimize`). Each backward is then one evaluation of a
fixed objective at a point the optimizer chose: its iterates and its line search's trial
points, which may overshoot and come back. The steps of updates by hand get that
optimizer's settings (a quasi-Newton step that sizes itself, by a line search), so the
rules read them as such and not as SGD steps on mini-batches."""

from __future__ import annotations

import math
import sys
from types import FrameType

from gradscope.steps.meaning import EXTERNAL_DRIVER, GroupSettings, OptimizerSettings
from gradscope.watcher.state import WatchState

DRIVER_MODULES = ("scipy.optimize",)
"""Packages whose minimisers call the script's objective: a frame of theirs below the
backward's start is the driver of the update by hand."""

FRAMES_LOOKED_AT = 200
"""Frames walked up from the backward's start (a training loop is rarely deeper)."""


def driving_module() -> str | None:
    """The driver package whose frame is on the current thread's stack, if any."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(FRAMES_LOOKED_AT):
        if frame is None:
            return None
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and any(
            name == m or name.startswith(m + ".") for m in DRIVER_MODULES
        ):
            return name
        frame = frame.f_back
    return None


def note_driver(state: WatchState, index: int, step: int) -> None:
    """An update by hand at `step`: where an external minimiser calls the objective, the
    stand-in optimizer at `index` takes its settings (once: the driver stays)."""
    history = state.settings.history
    if history.get(index) or driving_module() is None:
        return
    history[index] = [
        OptimizerSettings(EXTERNAL_DRIVER, step, (GroupSettings(lr=math.nan, line_search=True),))
    ]
