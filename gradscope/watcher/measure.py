"""Gradient and update norms of the tracked parameters, as device tensors (no host sync).

One `torch._foreach_norm` per measurement; index tensors are built once and cached, so
a step does no host-to-device copy either.
"""

from __future__ import annotations

import torch

from gradscope.distributed.norms import local
from gradscope.watcher.discover import Tracked
from gradscope.watcher.recorder import NO_GRAD


def norms(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Float32 L2 norms (a half-precision norm overflows long before its elements do)."""
    dense = [t.coalesce().values() if t.is_sparse else t for t in map(local, tensors)]
    return list(torch._foreach_norm(dense, 2, dtype=torch.float32))


def _device(params: list[torch.Tensor]) -> torch.device:
    return params[0].device if params else torch.device("cpu")


class Measure:
    """Norm vectors laid out like `tracked.params`; -1 marks "not there"."""

    def __init__(self, tracked: Tracked) -> None:
        self.tracked = tracked
        self._present: dict[tuple[bool, ...], torch.Tensor] = {}
        self._subsets: dict[tuple[int, ...], torch.Tensor] = {}

    def grads(self) -> torch.Tensor:
        """[P] float32 gradient norms; -1 where grad is None."""
        params = self.tracked.params
        grads = [p.grad for p in params if p.grad is not None]
        if len(grads) == len(params) and grads:
            return torch.stack(norms(grads))  # the common case: two kernels
        device = grads[0].device if grads else _device(params)
        out = torch.full((len(params),), NO_GRAD, device=device)
        if grads:
            present = tuple(p.grad is not None for p in params)
            index = self._present.get(present)
            if index is None:
                index = torch.tensor([i for i, k in enumerate(present) if k], device=device)
                self._present[present] = index
            out[index] = torch.stack(norms(grads)).to(device)
        return out

    def scatter(self, params: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
        """[P] vector holding `values` (norms of `params`) at their tracked positions."""
        device = values[0].device if values else _device(params)
        out = torch.full((len(self.tracked.params),), NO_GRAD, device=device)
        where = [self.tracked.index.get(id(p)) for p in params]
        keep = [(i, n) for i, n in zip(where, values, strict=True) if i is not None]
        if keep:
            key = tuple(i for i, _ in keep)
            index = self._subsets.get(key)
            if index is None:  # built once per optimizer: no host-to-device copy per step
                index = self._subsets[key] = torch.tensor(key, device=device)
            out[index] = torch.stack([n.to(device) for _, n in keep])
        return out
