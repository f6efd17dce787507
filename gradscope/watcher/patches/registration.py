"""torch's global hooks on a module registering a parameter or a submodule (assignment,
`register_parameter`, `add_module`, `load_state_dict(..., assign=True)`): a watched model
changed after its first step (replaced.py). Nothing runs unless a module registers one."""

from __future__ import annotations

from typing import Any

from torch.nn.modules import module as torch_module

from gradscope.watcher import replaced
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.state import WatchState

PART = "the module registration hook"


class Registration:
    """Both registration hooks, installed and removed together."""

    def __init__(self, state: WatchState) -> None:
        self.state = state
        self.handles: list[Any] = []

    def install(self) -> None:
        state = self.state

        def hook(module: Any, name: str, value: Any) -> None:
            here = enter(state)
            if here is not None:
                safely(state, here, PART, lambda: replaced.registered(state, module, name, value))

        for register in (
            getattr(torch_module, "register_module_parameter_registration_hook", None),
            getattr(torch_module, "register_module_module_registration_hook", None),
        ):
            if register is not None:
                self.handles.append(register(hook))

    def remove(self) -> None:
        while self.handles:
            self.handles.pop().remove()
