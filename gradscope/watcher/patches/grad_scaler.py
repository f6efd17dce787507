"""`GradScaler.scale` and `GradScaler.step` (class level): the unscaled loss, the loss
scale, and skipped steps. A non-fused optimizer's step hooks do not fire on a skipped
step (the step wrapper notices and records it); a fused one's fire on every step with
`optimizer.found_inf` and, unless `unscale_` ran, `optimizer.grad_scale` set and the
gradients still scaled, which the measurement divides out (stepping.py)."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher import nan_probe, stepping
from gradscope.watcher.backward_calls import probed
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

SCALE = "the GradScaler.scale() hook"
STEP = "the GradScaler.step() hook"


class Scale(Patch):
    name = "scale"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.amp.GradScaler)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def scale(scaler: Any, outputs: Any) -> Any:
            out = original(scaler, outputs)
            here = enter(state)
            if here is not None and isinstance(outputs, torch.Tensor) and out is not outputs:
                safely(state, here, SCALE, lambda: _scaled(here, out, outputs, scaler))
            return out

        return scale


class ScalerStep(Patch):
    name = "step"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.amp.GradScaler)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def step(scaler: Any, optimizer: Any, *args: Any, **kw: Any) -> Any:
            here = enter(state)
            if here is None:
                return original(scaler, optimizer, *args, **kw)
            call = [scaler, optimizer, False]
            here.scaler_calls.append(call)
            try:
                out = original(scaler, optimizer, *args, **kw)
                if scaler.is_enabled() and not call[2]:  # the optimizer's hooks never ran
                    safely(state, here, STEP, lambda: _skipped(state, here, optimizer))
                if state.probe.pending:  # found_inf was read: the probe's read costs nothing
                    safely(state, here, STEP, lambda: probed(state, _judge(state)))
            finally:
                here.scaler_calls = [c for c in here.scaler_calls if c is not call]
            return out

        return step


def _scaled(here: Any, out: torch.Tensor, outputs: torch.Tensor, scaler: Any) -> None:
    here.scaled = [*here.scaled[-3:], (out, outputs, scaler)]


def _skipped(state: WatchState, here: Any, optimizer: Any) -> None:
    loss = here.window.loss
    stepping.begin(state, here, optimizer, skipped=True)
    stepping.finish(state, here, optimizer)
    if not state.probe.done:  # known here at no cost: GradScaler read found_inf
        nan_probe.skipped(state.probe, state.steps, loss)


def _judge(state: WatchState) -> Any:
    return lambda: nan_probe.judge(state.probe, state)
