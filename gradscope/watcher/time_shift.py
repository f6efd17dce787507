"""Whether an autograd node moves a sequence later along its positions: a state computed
from tokens up to t placed at position t + k, as a temporal point process or a recurrent
tagger writes the shift after its encoder (`cat([h0, h[:, :-1]], 1)`, or
`F.pad(h, (0, 0, 1, 0))[:, :-1]`). Below such a node, position t of the loss no longer
reads the token at t: the model is fed the past, not the answer (target_leak.py)."""

from __future__ import annotations

from typing import Any

from gradscope.autograd_walk import saved

UNSIGNED = 1 << 64


def shifted_inputs(node: Any) -> set[int]:
    """The indices of `node`'s next_functions whose positions reach `node`'s output moved
    later by one or more: the last input of a cat along the axis its slice cut from the end
    (the others fill the first positions), or a pad at the front of the axis its slice cuts
    the end of by the same count."""
    name = type(node).__name__
    nexts = list(getattr(node, "next_functions", ()))
    if name == "SliceBackward0" and nexts and _padded_front(nexts[0][0], node):
        return {0}
    if name != "CatBackward0" or len(nexts) < 2:
        return set()
    last = nexts[-1][0]
    cut = _end_cut(last)
    if cut is None or cut[1] <= 0:
        return set()
    sizes = saved(last, "_saved_self_sym_sizes", None)
    if _axis(saved(node, "_saved_dim", None), len(sizes)) != cut[0]:
        return set()
    return {len(nexts) - 1} if _length(node, cut[0]) == int(sizes[cut[0]]) else set()


def _end_cut(node: Any) -> tuple[int, int] | None:
    """(axis, positions dropped) of a slice `x[..., :-k]` that keeps the start, else None."""
    if node is None or type(node).__name__ != "SliceBackward0":
        return None
    sizes = saved(node, "_saved_self_sym_sizes", None)
    start, end, step = (saved(node, f"_saved_{k}", None) for k in ("start", "end", "step"))
    if sizes is None or start not in (0, None) or step not in (1, None) or end is None:
        return None
    axis = _axis(saved(node, "_saved_dim", None), len(sizes))
    if axis is None:
        return None
    size = int(sizes[axis])
    end = int(end) - UNSIGNED if int(end) >= UNSIGNED // 2 else int(end)
    kept = min(end, size) if end >= 0 else max(size + end, 0)
    return axis, size - kept


def _padded_front(pad_node: Any, slice_node: Any) -> bool:
    """A constant pad that adds k positions at the front of the axis the slice above it
    cuts k from the end of: the sequence moved later by k."""
    cut = _end_cut(slice_node)
    if pad_node is None or type(pad_node).__name__ != "ConstantPadNdBackward0" or cut is None:
        return False
    pad = saved(pad_node, "_saved_pad", None)
    sizes = saved(slice_node, "_saved_self_sym_sizes", None)
    if not pad or sizes is None or cut[1] <= 0:
        return False
    from_last = len(sizes) - 1 - cut[0]
    if 2 * from_last + 1 >= len(pad):
        return False
    front, back = int(pad[2 * from_last]), int(pad[2 * from_last + 1])
    return front == cut[1] and back == 0


def _axis(dim: Any, ndim: int) -> int | None:
    if dim is None or ndim == 0:
        return None
    d = int(dim)
    d = d - UNSIGNED if d >= UNSIGNED // 2 else d
    return d % ndim


def _length(node: Any, axis: int) -> int | None:
    """The length along `axis` of `node`'s forward output."""
    meta = getattr(node, "_input_metadata", ())
    if not meta or len(meta[0].shape) <= axis:
        return None
    return int(meta[0].shape[axis])
