"""Tensors swapped inside an optimizer's param groups since its last step: add_param_group,
or 3D Gaussian splatting's densification and pruning (`group["params"][0] =
nn.Parameter(...)`, its Adam state moved over), where every group keeps its size and holds
new tensors. The new ones are tracked from that step; an old one a group let go of as it
took a new one is no longer trained (`replaced_after`, as a model's replaced layer is): the
script moved its training to the new one, so it is no parameter outside every optimizer."""

from __future__ import annotations

from typing import Any

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
