"""A parameter or module replaced in a watched model after the first step
(`layer.weight = nn.Parameter(...)`, `model.head = nn.Linear(...)`,
`load_state_dict(..., assign=True)`): torch's global registration hooks say that some
module registered one (nothing runs otherwise); when that module is one of the watched
models', the next optimizer step walks those models once and tracks what they now hold.
The tensors they no longer hold are no longer the model's (`ParamInfo.in_model`): an
optimizer still stepping them is GS437's. A parameter assigned under a name its module
already held a tensor under (before the first step too) keeps which one it replaced: one
an optimizer holds says the new one was made after the optimizer was built (GS411)."""

from __future__ import annotations

import weakref
from typing import Any

import torch

from gradscope.watcher import discover
from gradscope.watcher.state import WatchState

_PRUNE_AT = 4096
"""Assignments kept before those whose new tensor is gone are dropped (memory, not a
verdict: a gone tensor is judged by nothing)."""


def registered(state: WatchState, module: Any, name: str, value: Any) -> None:
    """A module registered a parameter or a submodule (the hook's part)."""
    assigned(state, module, name, value)
    if not state.steps or state.replaced:
        return  # before the first step discovery reads the model as it is then
    roots = state.tracked.roots
    if state.model_modules[0] != len(roots):
        state.model_modules = (len(roots), {id(m) for r in roots for m in r.modules()})
    if id(module) in state.model_modules[1]:
        state.replaced = True


def assigned(state: WatchState, module: Any, name: str, value: Any) -> None:
    """A parameter or submodule registered under a name its module already held one under
    (the hook runs before the new one is stored): which tensor each new parameter replaced
    (a submodule's, by its name inside it), kept weakly, so that one assigned in place of a
    tensor an optimizer holds is named as such (a tie undone after the optimizer was built:
    `head.weight = nn.Parameter(...)`, `layers[2] = copy.deepcopy(layers[0])`)."""
    if isinstance(value, torch.Tensor):
        pairs = [(value, getattr(module, "_parameters", {}).get(name))]
    elif isinstance(value, torch.nn.Module):
        before = getattr(module, "_modules", {}).get(name)
        olds = dict(before.named_parameters()) if isinstance(before, torch.nn.Module) else {}
        pairs = [(p, olds.get(n)) for n, p in value.named_parameters()] if olds else []
    else:
        return
    for new, old in pairs:
        if isinstance(old, torch.Tensor) and old is not new:
            if len(state.assigned_over) >= _PRUNE_AT:  # a script re-assigning every step
                state.assigned_over = {
                    k: refs for k, refs in state.assigned_over.items() if refs[0]() is not None
                }
            state.assigned_over[id(new)] = (weakref.ref(new), weakref.ref(old))


def assigned_in_place_of(state: WatchState, param: Any, held: set[int]) -> str | None:
    """The name of the tensor an optimizer holds that `param` was assigned in place of
    (the optimizer's name for it where no model names it); None: none."""
    refs = state.assigned_over.get(id(param))
    if refs is None or refs[0]() is not param:
        return None
    old = refs[1]()
    if old is None or id(old) not in held:
        return None
    position = state.tracked.index.get(id(old))
    return state.tracked.names[position] if position is not None else "a tensor it holds"


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
