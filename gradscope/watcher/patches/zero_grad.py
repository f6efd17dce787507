"""`Optimizer.zero_grad` and `Module.zero_grad`: a reset of gradients seen (resets.py),
and a reset between micro-batches (noise_scale.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradscope.watcher import resets
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState

PART = "the zero_grad() hook"


class OptimizerZeroGrad(Patch):
    name = "zero_grad"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.optim.Optimizer)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def zero_grad(optimizer: Any, *args: Any, **kw: Any) -> Any:
            here = enter(state)
            if here is None:
                return original(optimizer, *args, **kw)

            def params() -> Any:
                return (p for g in optimizer.param_groups for p in g["params"])

            safely(state, here, PART, lambda: _resetting(state, here, params))
            safely(state, here, PART, lambda: resets.clearing(state, optimizer, params()))
            out = original(optimizer, *args, **kw)
            safely(state, here, PART, lambda: resets.optimizer_reset(state, optimizer))
            return out

        return zero_grad


class ModuleZeroGrad(Patch):
    name = "zero_grad"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.nn.Module)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def zero_grad(module: Any, *args: Any, **kw: Any) -> Any:
            here = enter(state)
            if here is None:
                return original(module, *args, **kw)
            safely(state, here, PART, lambda: _resetting(state, here, module.parameters))
            out = original(module, *args, **kw)
            safely(state, here, PART, lambda: resets.module_reset(state, module))
            return out

        return zero_grad


def _resetting(state: WatchState, here: ThreadState, params: Callable[[], Any]) -> None:
    resets.resetting(state, here, params)
    state.noise.reset(here.window, params)
