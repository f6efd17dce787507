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

import torch

from gradscope.steps.meaning import EXTERNAL_DRIVER, GroupSettings, OptimizerSettings
from gradscope.watcher import discover
from gradscope.watcher.manual_search import ManualCheck
from gradscope.watcher.state import WatchState
from gradscope.watcher.subclass_leaves import leaf_grad

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
    """An update by hand at `step` whose backward an external minimiser drove (found once
    per backward: manual.backward_end): the stand-in optimizer at `index` takes its
    settings (once: the driver stays)."""
    history = state.settings.history
    if history.get(index):
        return
    history[index] = [
        OptimizerSettings(EXTERNAL_DRIVER, step, (GroupSettings(lr=math.nan, line_search=True),))
    ]


def newly_reached(state: WatchState, manual: ManualCheck, roots: list[torch.Tensor]) -> None:
    """A backward the minimiser drives reaches parameters no earlier one did: a model built
    since (botorch refits a new GP at each step of a Bayesian optimisation loop, and fits a
    ModelListGP's models one by one). Tracked from here, their fit is watched as the first
    one was. Plain tensors are left out: the candidates `optimize_acqf` moves are inputs."""
    known = state.tracked.index
    new = [
        p
        for p in discover.graph_leaves(roots)
        if isinstance(p, torch.nn.Parameter) and id(p) not in known and leaf_grad(p) is not None
    ]
    if new:
        discover.extend(state.tracked, state.known, new, extra_name="tensor")
        manual.params += new
