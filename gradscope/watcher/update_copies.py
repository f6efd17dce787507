"""The copies a measured step takes before its update (updates.py), in flat buffers that
the dense steps reuse: a fresh clone of each tensor at every one of a run's first 100
steps was a malloc and, on a CPU, a first write into memory the allocator had just
handed back (a 16 MiB clone took 3.2 ms of CPU in a 10M-parameter GPT's run, a copy
into memory already written 1.7 ms)."""

from __future__ import annotations

import threading

import torch


class CopyBuffers:
    """One flat buffer per dtype, lent to one step at a time (a step of another thread
    meanwhile clones); released when the dense steps end (later steps are one in
    `--update-every`, and the buffer would be kept for the rest of the run)."""

    def __init__(self) -> None:
        self._flat: dict[torch.dtype, torch.Tensor] = {}
        self._lent = threading.Lock()

    def take(self, tensors: list[torch.Tensor], reuse: bool) -> tuple[list[torch.Tensor], bool]:
        """Copies of `tensors`, and whether they are the buffers' (then `give_back` once
        they are read). `reuse` False: fresh clones, and the buffers are released."""
        if not reuse:
            if self._lent.acquire(blocking=False):
                self._flat.clear()
                self._lent.release()
            return _clones(tensors), False
        if not tensors or not all(_plain(t) for t in tensors):
            return _clones(tensors), False
        if not self._lent.acquire(blocking=False):
            return _clones(tensors), False
        return self._copies(tensors), True

    def give_back(self) -> None:
        """The lent copies were read: the next step may have the buffers."""
        self._lent.release()

    def _copies(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        wanted: dict[torch.dtype, int] = {}
        for t in tensors:
            wanted[t.dtype] = wanted.get(t.dtype, 0) + t.numel()
        offsets = dict.fromkeys(wanted, 0)
        out = []
        with torch.no_grad():
            for t in tensors:
                flat = self._buffer(t.dtype, wanted[t.dtype])
                at = offsets[t.dtype]
                copy = flat[at : at + t.numel()].view(t.shape)
                copy.copy_(t.detach())
                offsets[t.dtype] = at + t.numel()
                out.append(copy)
        return out

    def _buffer(self, dtype: torch.dtype, numel: int) -> torch.Tensor:
        flat = self._flat.get(dtype)
        if flat is None or flat.numel() < numel:
            flat = self._flat[dtype] = torch.empty(numel, dtype=dtype)
        return flat


def _plain(t: torch.Tensor) -> bool:
    """A dense CPU tensor of torch's own class (not a shard, not a subclass)."""
    detached = t.detach()
    return type(detached) is torch.Tensor and t.device.type == "cpu" and t.layout is torch.strided


def _clones(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [p.detach().clone() for p in tensors]
