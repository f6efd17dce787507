"""A parameter or module replaced in a watched model after the first step
(`layer.weight = nn.Parameter(...)`, `model.head = nn.Linear(...)`,
`load_state_dict(..., assign=True)`): torch's global registration hooks say that some
module registered one (nothing runs otherwise); when that module is one of the watched
models', the next optimizer step walks those models once and tracks what they now hold.
The tensors they no longer hold are no longer the model's (`ParamInfo.in_model`): an
optimizer still stepping them is GS437's."""

from __future__ import annotations

from typing import Any

from gradscope.watcher import discover
from gradscope.watcher.state import WatchState


def registered(state: WatchState, module: Any) -> None:
    """A module registered a parameter or a submodule (the hook's part)."""
    if not state.steps or state.replaced:
        return  # before the first step discovery reads the model as it is then
    roots = state.tracked.roots
    if state.model_modules[0] != len(roots):
        state.model_modules = (len(roots), {id(m) for r in roots for m in r.modules()})
    if id(module) in state.model_modules[1]:
        state.replaced = True


def refresh(state: WatchState) -> None:
    """At the step after a registration: each watched model's parameters tracked, and
    the tracked ones it no longer holds marked as no longer the model's."""
    state.replaced = False
    tracked = state.tracked
    held: set[int] = set()
    for root in list(tracked.roots):
        for name, param in discover.unwrapped(root).named_parameters():
            held.add(id(param))
            if id(param) not in tracked.index and param.requires_grad:
                tracked.add_model(root, discover.strip(name), param)
    for position in list(tracked.owners):
        if id(tracked.params[position]) not in held:
            _stale(state, position)
    state.model_modules = (-1, set())


def _stale(state: WatchState, position: int) -> None:
    """No longer the model's: its name says since when."""
    tracked = state.tracked
    if tracked.owners.pop(position, None) is None:
        return
    tracked.names[position] = f"{tracked.names[position]} (replaced after step {state.steps})"
    state.replaced_after[position] = state.steps
