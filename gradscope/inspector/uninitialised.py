"""Memory left uninitialised, kept out of the non-finite producer scans.

`torch.empty` and its kin return whatever bytes the allocator had, NaN bit patterns
included: they make no value, so their outputs are never judged. A value in that memory
is judged where an op reads it to compute another, or where an op that read none of it
writes it (`copy_`, `fill_`, an `out=`); a view of it, or an op in place on it, is not
judged: what it holds may not be written yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

UNINITIALISED = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "empty_permuted",
        "new_empty",
        "new_empty_strided",
        "new",  # the legacy x.new(3, 4): uninitialised like torch.empty
        "resize_",  # the grown part
        "resize_as_",
        "set_",
        "empty_quantized",
        "_empty_affine_quantized",
        "_empty_per_channel_affine_quantized",
    }
)
"""Ops whose outputs hold memory nobody wrote."""

WRITES = frozenset(
    {
        "copy_",
        "fill_",
        "zero_",
        "uniform_",
        "normal_",
        "random_",
        "bernoulli_",
        "exponential_",
        "geometric_",
        "log_normal_",
        "cauchy_",
    }
)
"""In-place ops that write every element of their tensor without reading it."""

MAX_TRACKED = 4096


class Unwritten:
    """The storages an uninitialising op made, with the op's site, while they live."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[StorageWeakRef, Any]] = {}

    def screen(
        self, name: str, inputs: Sequence[torch.Tensor], outs: Sequence[torch.Tensor], site: Any
    ) -> list[torch.Tensor] | None:
        """The inputs whose values `name` read to make `outs`, the outputs to be judged
        against them; None when the outputs are not to be judged (memory no one wrote)."""
        if name in UNINITIALISED:
            for t in outs:
                self._note(t, site)
            return None
        read = list(inputs)
        if name in WRITES:  # its self is written, not read
            read = [t for t in inputs if not any(t is o for o in outs)]
        if self.made:
            fresh = {_storage_ptr(o) for o in outs if self.site_of(o) is not None}
            if fresh and any(_storage_ptr(t) in fresh for t in read):
                return None  # a view of it, or an op in place on it
        return read

    def site_of(self, t: torch.Tensor) -> Any:
        """The site of the op that left `t`'s memory uninitialised, if one did."""
        ptr = _storage_ptr(t)
        entry = self.made.get(ptr) if ptr else None
        if entry is None:
            return None
        if entry[0].expired():
            del self.made[ptr]
            return None
        return entry[1]

    def _note(self, t: torch.Tensor, site: Any) -> None:
        ptr = _storage_ptr(t)
        if not ptr:
            return
        if len(self.made) >= MAX_TRACKED:
            self.made = {p: e for p, e in self.made.items() if not e[0].expired()}
            if len(self.made) >= MAX_TRACKED:
                return
        self.made[ptr] = (StorageWeakRef(t.untyped_storage()), site)


def without_out(kwargs: dict[str, Any]) -> dict[str, Any]:
    """An op's keyword arguments less its `out=`: what it writes, not what it reads."""
    return {k: v for k, v in kwargs.items() if k != "out"} if "out" in kwargs else kwargs


def _storage_ptr(t: torch.Tensor) -> int:
    """The address of `t`'s storage; 0 where it has none to read (meta, sparse, empty)."""
    try:
        if t.is_meta or t.layout != torch.strided:
            return 0
        return int(t.untyped_storage().data_ptr())
    except Exception:  # a subclass or a functional tensor: no storage of its own
        return 0
