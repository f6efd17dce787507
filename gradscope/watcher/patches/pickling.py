"""`nn.Module.__getstate__`: a model the script pickles or copies carries none of the
noise scale's forward hooks (noise_scale.MicroGrads.wrap_getstate), nor the evaluation
passes' (eval_passes.EvalPasses.wrap_getstate)."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState


class ModuleGetstate(Patch):
    name = "__getstate__"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.nn.Module)

    def wrap(self, original: Any) -> Any:
        return self.state.eval_passes.wrap_getstate(self.state.noise.wrap_getstate(original))
