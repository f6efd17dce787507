"""What a step's autograd graph holds: the activations saved for backward (each storage once,
read off the graph without unpacking), and the module attributes that keep the graph alive
after the step (GS301's evidence)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from gradscope.autograd_walk import NodeWalk
from gradscope.inspector.preserve import storage_of

_SAVED_SLOTS: dict[type, tuple[str, ...]] = {}
"""Backward node class → its attributes that hold saved tensors (found with dir() once)."""


def saved_bytes(nodes: Iterable[Any], params: Sequence[torch.Tensor]) -> int:
    """Bytes of activations the loss's graph holds for backward, each storage once.

    Read off the graph after the forward, not with saved-tensor hooks during it: those
    cost a Python call per saved tensor in the forward and again in the backward
    (~0.6 ms for a small CNN's 150). Parameters saved for backward are not activations.
    """
    weights = {storage_of(p) for p in params}
    sizes: dict[tuple[int, int], int] = {}
    for node in nodes:
        for t in _saved_tensors(node):
            where = storage_of(t)
            if where is not None and where not in weights:
                sizes[(where, int(t.storage_offset()))] = t.nbytes
    return sum(sizes.values())


def _saved_tensors(node: Any) -> Iterator[torch.Tensor]:
    """What a backward node saved, read without unpacking it: unpacking runs a saved tensor's
    hooks (non-reentrant checkpointing would recompute its region). A tensor with hooks of
    its own is left out (checkpointing recomputes it, save_on_cpu moved it), and so is a
    parameter saved through a view (torch keeps no readable data for it)."""
    slots = _SAVED_SLOTS.get(type(node))
    if slots is None:
        slots = tuple(a for a in dir(node) if a.startswith("_raw_saved_"))
        _SAVED_SLOTS[type(node)] = slots
    for slot in slots:
        try:
            raw = getattr(node, slot)
        except RuntimeError:  # freed by an earlier backward
            continue
        for saved in raw if isinstance(raw, (list, tuple)) else (raw,):
            if saved is not None and saved.unpack_hook is None:
                data = saved.data
                if isinstance(data, torch.Tensor):
                    yield data


def retained_graphs(
    modules: Iterable[tuple[str, torch.nn.Module]], params: Sequence[torch.Tensor]
) -> tuple[str, ...]:
    """Module attributes that keep part of the step's graph alive after the backward: a
    list or dict of tensors with a grad_fn (the classic slow out-of-memory:
    `self.losses.append(loss)` keeps one more graph each step), or a tensor whose graph still
    holds saved activations the backward did not free (an output off the loss's path, a
    backward with retain_graph). A tensor the loss used (`self.kl`, `self.aux_loss` summed
    into it) holds only freed nodes until the next forward replaces it: nothing to fix."""
    return tuple(
        f"{name}.{attr}" if name else attr
        for name, module in modules
        for attr, value in vars(module).items()
        if isinstance(value, _HOLDERS) and attr[0] != "_" and _keeps_graph(value, params)
    )


def _keeps_graph(value: Any, params: Sequence[torch.Tensor]) -> bool:
    if isinstance(value, (list, dict)):
        return _holds_graph(value)
    tensors = (value,) if isinstance(value, torch.Tensor) else value
    roots = [t.grad_fn for t in tensors if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    return bool(roots) and saved_bytes(NodeWalk(roots), params) > 0


_HOLDERS = (torch.Tensor, list, tuple, dict)
"""What an attribute must be to hold a graph (most are flags and sizes: one type test)."""


def _holds_graph(value: Any) -> bool:
    """A tensor with a grad_fn, directly or in a list, tuple or dict."""
    if isinstance(value, torch.Tensor):
        return value.grad_fn is not None
    return any(
        isinstance(v, torch.Tensor) and v.grad_fn is not None
        for v in (value.values() if isinstance(value, dict) else value)
    )
