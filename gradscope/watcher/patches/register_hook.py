"""`Tensor.register_hook`: a hook of the user's registered on a tensor that already holds a
live one of the same function (hooks_again.py); the registration itself runs unchanged."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher.guard import enter, safely
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

PART = "the register_hook() hook"


class TensorRegisterHook(Patch):
    name = "register_hook"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.Tensor)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def register_hook(tensor: Any, hook: Any) -> Any:
            here = enter(state)
            if here is not None and not here.depth:
                step = state.steps + 1
                safely(state, here, PART, lambda: state.hooks_again.note(tensor, hook, step))
            return original(tensor, hook)

        return register_hook
