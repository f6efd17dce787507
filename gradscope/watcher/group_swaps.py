"""Tensors swapped inside an optimizer's param groups since its last step: add_param_group,
or 3D Gaussian splatting's densification and pruning (`group["params"][0] =
nn.Parameter(...)`, its Adam state moved over), where every group keeps its size and holds
new tensors. The new ones are tracked from that step; an old one a group let go of as it
took a new one is no longer trained (`replaced_after`, as a model's replaced layer is): the
script moved its training to the new one, so it is no parameter outside every optimizer.
At the next swap, one no backward reached since is let go (a stand-in of its shape holds its
place): a densifying run swaps every 100 steps for 15,000, and holding each generation with
its gradient would fill the device. One the loss still reaches is kept, and named."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher import discover
from gradscope.watcher.state import WatchState

Held = tuple[tuple[int, ...], ...]
"""The ids of each param group's tensors, in the groups' order."""


def held(optimizer: Any) -> Held:
    """The optimizer's groups' tensors, by id."""
    return tuple(tuple(map(id, g["params"])) for g in optimizer.param_groups)


def swapped(state: WatchState, optimizer: Any) -> bool:
    """The optimizer holds tensors it did not at its last step (asked at every step);
    if so they are tracked, the caches of its members dropped, and the tensors its
    groups let go of as they took new ones marked replaced."""
    now = held(optimizer)
    watch = state.of(optimizer)
    last, watch.group_ids = watch.group_ids, now
    if last is None or last == now:
        return False
    watch.members = watch.trained = None
    _let_go_unreached(state)
    discover.extend(state.tracked, state.known)
    _retire(state, last, now)
    return True


def _retire(state: WatchState, last: Held, now: Held) -> None:
    """Mark the tensors a group dropped while it took new ones (a swap, not a removal),
    unless another optimizer still holds them (groups added at the end take none)."""
    kept = {i for o in state.known for group in held(o) for i in group}
    index, tracked = state.tracked.index, state.tracked
    for before, after in zip(last, now, strict=False):
        if not set(after) - set(before):
            continue  # nothing new in this group: a tensor removed is not replaced
        for ident in set(before) - set(after) - kept:
            position = index.get(ident)
            if position is None or position in state.replaced_after:
                continue
            state.replaced_after[position] = state.steps
            tracked.names[position] = (
                f"{tracked.names[position]} (replaced in the optimizer after step {state.steps})"
            )
            state.retiring[position] = _grad_mark(tracked.params[position])


def _grad_mark(param: torch.Tensor) -> tuple[int, int]:
    grad = param.grad
    return (0, 0) if grad is None else (id(grad), grad._version)


def _let_go_unreached(state: WatchState) -> None:
    """Each retired tensor whose gradient no backward touched since, held from now on by a
    stand-in of its shape, dtype and device that owns one element: the tensor and its
    gradient are freed once the script drops them, and its id is free for a new tensor."""
    tracked = state.tracked
    for position, mark in list(state.retiring.items()):
        old = tracked.params[position]
        if _grad_mark(old) != mark:
            continue  # the loss still reaches it: kept, for GS411 to name
        del state.retiring[position]
        tracked.index.pop(id(old), None)
        stand_in = torch.zeros((), dtype=old.dtype, device=old.device).expand(old.shape)
        tracked.params[position] = stand_in.detach().requires_grad_(old.requires_grad)
