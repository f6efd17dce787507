"""`nn.Module.__getstate__`: a model the script pickles or copies carries none of the
noise scale's forward hooks (noise_scale.MicroGrads.wrap_getstate), nor the evaluation
passes' (eval_passes.EvalPasses.wrap_getstate); and the RNNs' own `__getstate__`, which
replaces it, as they hold the hook that reads their batch."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

OWNERS = (torch.nn.Module, torch.nn.RNNBase)
"""The classes whose own `__getstate__` pickles a module the noise scale hooks."""


class ModuleGetstate(Patch):
    name = "__getstate__"

    def __init__(self, state: WatchState, owner: Any = torch.nn.Module) -> None:
        super().__init__(state, owner)

    def wrap(self, original: Any) -> Any:
        return self.state.eval_passes.wrap_getstate(self.state.noise.wrap_getstate(original))
