"""`nn.Module.train` (and so `eval`): the file:line of the script's outermost
eval()/train(False) call on a module, for the finding that a model trained in eval mode
(modes.py). The calls it makes into the module's children are not noted; a call costs a
frame walk only when it switches to eval."""

from __future__ import annotations

import threading
from typing import Any

import torch

from gradscope.errors import user_line
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState


class ModuleTrain(Patch):
    name = "train"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.nn.Module)
        self.inside = threading.local()

    def wrap(self, original: Any) -> Any:
        state, inside = self.state, self.inside

        def train(module: Any, mode: bool = True) -> Any:
            if state.off or getattr(inside, "depth", False):
                return original(module, mode)
            if not mode:
                state.modes.calls[id(module)] = user_line()
                state.modes.call_steps[id(module)] = state.steps
                state.modes.evaled.add(id(module))
            inside.depth = True
            try:
                return original(module, mode)
            finally:
                inside.depth = False

        return train
