"""Tensors nested in a call's arguments and in its output (tuples, lists, dicts), found,
named and replaced, as torch's own checks flatten them.

torch is imported inside the functions, as in gradscope.gradcheck.inputs, which uses these."""

from __future__ import annotations

from typing import Any

# torch is imported in functions: `gradscope --help` must not load it

Path = tuple[Any, ...]
"""Where a tensor sits inside one argument: () for the argument itself, (0, 'k') nested."""


def nested(value: Any, path: Path = (), name: str = "") -> list[tuple[Path, str, Any]]:
    """Every tensor in a (nested) argument: (path, name suffix like `[0]['k']`, tensor)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [(path, name, value)]
    if isinstance(value, dict):
        items: list[tuple[Any, Any]] = list(value.items())
    elif isinstance(value, (tuple, list)):
        items = list(enumerate(value))
    else:
        return []
    return [
        found
        for key, v in items
        for found in nested(
            v, (*path, key), f"{name}[{key!r}]" if isinstance(value, dict) else f"{name}[{key}]"
        )
    ]


def replaced(value: Any, path: Path, tensor: Any) -> Any:
    """`value` with the tensor at `path` replaced; containers copied, never mutated."""
    if not path:
        return tensor
    key, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, key: replaced(value[key], rest, tensor)}
    items = list(value)
    items[key] = replaced(items[key], rest, tensor)
    if isinstance(value, list):
        return items
    if hasattr(value, "_fields"):  # a namedtuple
        return type(value)(*items)
    return type(value)(items)


def is_dual(t: Any) -> bool:
    """A forward-AD dual tensor: equal to the base in value, but carrying a tangent."""
    import torch.autograd.forward_ad as fwAD

    return fwAD.unpack_dual(t).tangent is not None


def flatten(out: Any) -> tuple[list[str], list[Any]]:
    """Floating-point and complex tensors of a (nested) output, named `out`, `out[1]`,
    `out['loss']`."""
    import torch

    names: list[str] = []
    tensors: list[Any] = []
    stack: list[tuple[str, Any]] = [("out", out)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() or value.is_complex():
                names.append(name)
                tensors.append(value)
        elif isinstance(value, dict):
            stack += reversed([(f"{name}[{k!r}]", v) for k, v in value.items()])
        elif isinstance(value, (tuple, list)):
            stack += reversed([(f"{name}[{k}]", v) for k, v in enumerate(value)])
    return names, tensors
