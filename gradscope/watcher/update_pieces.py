"""The derived update's temporaries, in bounded pieces (updates.py): a model whose
tensors fit in one piece is computed whole, in fresh temporaries (the same few sizes at
every step, which glibc hands back); a larger one in flat pieces whose temporaries live
in two buffers reused from step to step (Scratch)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

PIECE = 4 * 2**20
"""Bytes of each piece of derived temporaries on a CPU (cache-sized: fewer memory
passes); on an accelerator the pieces are as large as the budget."""

SMALL = 256 * 2**10
"""Bytes below which a piece's temporaries are fresh: glibc serves such blocks from its
bins and reuses them, and a copy into the buffers would cost more than it saves."""


class Scratch:
    """Two flat buffers of a piece's size per dtype, reused by every measured step's
    derived update on the CPU. Fresh temporaries would each be a new malloc of up to
    PIECE bytes: glibc's dynamic mmap threshold puts them in the heap, whose freed
    holes peak RSS keeps (up to +9% on a 0.35B AdamW model); these are allocated once.
    On an accelerator the caching allocator already reuses its blocks: fresh ones."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[torch.dtype, int], torch.Tensor] = {}

    def apply(self, op: str, tensors: list[torch.Tensor], slot: int, *args: Any) -> list[Any]:
        """`torch._foreach_<op>(tensors, *args)`: its result written into buffer `slot`
        where that is worth it (one `torch.<op>(..., out=)` per tensor: no copy of the
        operands into the buffer first, a pass over them that cost as much as the op),
        else fresh. A list among `args` gives each tensor its own."""
        views = self.views(tensors, slot)
        if views is None:
            return list(getattr(torch, f"_foreach_{op}")(tensors, *args))
        fn = getattr(torch, op)
        for k, (t, out) in enumerate(zip(tensors, views, strict=True)):
            fn(t, *(a[k] if isinstance(a, list) else a for a in args), out=out)
        return views

    def views(self, tensors: list[torch.Tensor], slot: int) -> list[torch.Tensor] | None:
        """Views of buffer `slot` shaped like `tensors` (their contents undefined); None
        where fresh temporaries do (small pieces, an accelerator, mixed dtypes)."""
        first = tensors[0]
        sizes = [t.numel() for t in tensors]
        if first.device.type != "cpu" or sum(sizes) * first.element_size() < SMALL:
            return None
        if any(t.dtype != first.dtype for t in tensors):
            return None
        flat = self._buffer(first.dtype, slot, sum(sizes))
        return [v.view(t.shape) for v, t in zip(flat.split(sizes), tensors, strict=True)]

    def _buffer(self, dtype: torch.dtype, slot: int, numel: int) -> torch.Tensor:
        buffer = self._buffers.get((dtype, slot))
        if buffer is None or buffer.numel() < numel:
            size = max(numel, PIECE // torch.empty((), dtype=dtype).element_size())
            buffer = self._buffers[(dtype, slot)] = torch.empty(size, dtype=dtype)
        return buffer[:numel]


def apply(scratch: Scratch | None, op: str, tensors: list[torch.Tensor], slot: int, *args: Any):
    """`torch._foreach_<op>(tensors, *args)`, in `scratch`'s buffer `slot` (None: fresh)."""
    if scratch is None:
        return list(getattr(torch, f"_foreach_{op}")(tensors, *args))
    return scratch.apply(op, tensors, slot, *args)


# -- pieces ----------------------------------------------------------------------------
Piece = Any  # (owners, [pieces of each list], scratch or None) -> a norm per piece


def pieced(
    tensors: list[list[torch.Tensor]], piece: Piece, scratch: Scratch, limit: int
) -> list[torch.Tensor]:
    """Per tensor of the aligned lists `tensors`, the norm of what `piece` makes of its
    elements, computed in batches of flat pieces of at most `limit` bytes of the first
    list, so that no temporary exceeds a bound. Lists within one piece are computed
    whole, in fresh temporaries: a copy into the buffers is one more pass over the
    parameters, at each of the first 100 steps (a quarter of the derived update's time
    on a 0.4M-parameter char-LM), and the slicing another."""
    first = tensors[0]
    if not first:
        return []
    if sum(t.numel() * t.element_size() for t in first) <= limit:
        return list(piece(list(range(len(first))), tensors, None))
    found: dict[int, list[torch.Tensor]] = {}
    for owners, parts in _batches(tensors, limit):
        for o, n in zip(owners, piece(owners, parts, scratch), strict=True):
            found.setdefault(o, []).append(n)
    return [
        found[o][0] if len(found[o]) == 1 else torch.linalg.vector_norm(torch.stack(found[o]))
        for o in range(len(first))
    ]


def _batches(
    tensors: list[list[torch.Tensor]], limit: int
) -> Iterator[tuple[list[int], list[list[torch.Tensor]]]]:
    """(owner of each piece, the pieces of each list), at most `limit` bytes of the first
    list per batch. A piece is a flat slice of a contiguous tensor, else rows."""
    owners: list[int] = []
    parts: list[list[torch.Tensor]] = [[] for _ in tensors]
    used = 0
    for o, aligned in enumerate(zip(*tensors, strict=True)):
        flat = all(t.is_contiguous() for t in aligned)
        for sliced in zip(*(_split(t, limit, flat) for t in aligned), strict=True):
            size = sliced[0].numel() * sliced[0].element_size()
            if owners and used + size > limit:
                yield owners, parts
                owners, parts, used = [], [[] for _ in tensors], 0
            owners.append(o)
            for part, t in zip(parts, sliced, strict=True):
                part.append(t)
            used += size
    if owners:
        yield owners, parts


def _split(t: torch.Tensor, limit: int, flat: bool) -> tuple[torch.Tensor, ...]:
    """Views of `t` of at most `limit` bytes: flat slices, or (not contiguous) rows."""
    step = max(1, limit // max(1, t.element_size()))
    if t.numel() <= step:
        return (t,)
    if flat:
        return t.view(-1).split(step)
    rows = max(1, step // max(1, t[0].numel()))
    return t.split(rows)
