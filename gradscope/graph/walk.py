"""The autograd graph reached from a loss, as plain tables: found with an explicit stack.

torchviz's `add_nodes` recurses and fails on deep graphs (szagoruyko/pytorchviz#57,
#65); this walk does not. torch is imported lazily.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gradscope.autograd_walk import Order, backward_nodes, inputs

# torch is imported in functions: `gradscope --help` must not load it

SAVED_PREFIX = "_saved_"
"""grad_fn attributes that hold what backward needs (torchviz reads the same)."""


@dataclass
class Walk:
    """The autograd graph reached from a loss, as plain tables (found without recursion)."""

    fns: dict[int, Any]
    """id → backward node; holding them keeps the ids unique."""
    edges: list[tuple[int, int]]
    """(input node, consuming node): forward direction, as torchviz draws it."""
    variables: dict[int, Any]
    """AccumulateGrad node id → the leaf tensor whose .grad it fills."""
    saved: list[tuple[int, str, Any]]
    """(node id, attribute, tensor) for saved tensors."""


def walk(loss: Any, show_saved: bool = False) -> Walk:
    """Every backward node reached from `loss`, each once, numbered in the order reached
    (deep graphs are fine: the walk has no recursion)."""
    w = Walk({}, [], {}, [])
    if loss.grad_fn is not None:
        w.fns[id(loss.grad_fn)] = loss.grad_fn
    for fn in backward_nodes([loss], order=Order.REACHED):
        variable = getattr(fn, "variable", None)
        if variable is not None:
            w.variables[id(fn)] = variable
        w.saved.extend((id(fn), name, t) for name, t in _saved(fn, show_saved))
        for nxt in inputs(fn):
            w.edges.append((id(nxt), id(fn)))
            w.fns.setdefault(id(nxt), nxt)
    return w


def _saved(fn: Any, show_saved: bool) -> Iterator[tuple[str, Any]]:
    """Custom Functions' saved tensors always (as torchviz); built-in ones' with show_saved."""
    import torch

    try:
        custom = tuple(getattr(fn, "saved_tensors", ()))
    except RuntimeError:  # already freed by a backward
        custom = ()
    yield from ((f"saved[{i}]", t) for i, t in enumerate(custom) if torch.is_tensor(t))
    if not show_saved:
        return
    for attr in dir(fn):
        if not attr.startswith(SAVED_PREFIX):
            continue
        try:
            value = getattr(fn, attr)
        except RuntimeError:
            continue
        name = attr[len(SAVED_PREFIX) :]
        if torch.is_tensor(value):
            yield name, value
        elif isinstance(value, tuple):
            yield from ((f"{name}[{i}]", t) for i, t in enumerate(value) if torch.is_tensor(t))


def saved_key(fn_id: int, name: str, t: Any) -> tuple[Any, ...]:
    """One node per tensor: the same memory saved by several ops is drawn once."""
    if t.numel() == 0:
        return (fn_id, name)
    return (t.data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), str(t.dtype))


def param_names(model: Any) -> dict[int, list[str]]:
    """id(parameter) → its names, the canonical (first) one first; tied weights have several."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    return names
