"""Gradient and update norms of the tracked parameters, as device tensors (no host sync).

One `torch._foreach_norm` per measurement; index tensors are built once and cached, so
a step does no host-to-device copy either.

Norms accumulate in float64 whatever the parameter's dtype (float16, bfloat16, float32,
float64, complex): a float32 gradient whose elements are ~1e19 has a finite norm, and a
norm must never report a non-finite value its elements do not hold. MPS has no float64;
there the accumulation is float32.
"""

from __future__ import annotations

import math

import torch

from gradscope.distributed.norms import local
from gradscope.watcher.discover import Tracked
from gradscope.watcher.recorder import NO_GRAD


def accumulation(device: torch.device) -> torch.dtype:
    """float64, except where the device has none (MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def plain(t: torch.Tensor) -> torch.Tensor:
    """`t` ready for a norm: this rank's part of a DTensor, outside autograd, a sparse
    tensor's values, a complex tensor's real view. A plain tensor (the common case, at
    every step) is checked in a few attribute reads and returned as it is."""
    if type(t) is torch.Tensor and not t.requires_grad and not t.is_sparse and not t.is_complex():
        return t
    return as_real(local(t).detach())


def as_real(t: torch.Tensor) -> torch.Tensor:
    if t.is_sparse:
        t = t.coalesce().values()
    if t.is_complex():
        t = torch.view_as_real(t)  # |z|² = re² + im²: the same L2 norm
    return t


def norms(tensors: list[torch.Tensor], ord: float = 2.0) -> list[torch.Tensor]:
    """L2 (or `ord`) norms as 0-dim float64 tensors (float32 on MPS), never non-finite
    where the elements are finite.

    On an accelerator the fused norm accumulates in float64 inside its kernel. On the
    CPU a float64 norm of float32 tensors first copies them (ten times the cost), and a
    read-back costs nothing there: the fused norm runs in the tensors' own precision,
    and only the norms that overflowed or underflowed (inf, or 0) are taken again in
    float64.
    """
    dense = [plain(t) for t in tensors]
    if not dense:
        return []
    device = dense[0].device
    dtype = accumulation(device)
    if device.type == "cpu":
        return _cpu_norms(dense, ord)
    if dtype == torch.float64 or all(t.dtype != torch.float64 for t in dense):
        try:
            return list(torch._foreach_norm(dense, ord, dtype=dtype))
        except (RuntimeError, TypeError, NotImplementedError):
            pass  # a dtype the fused norm does not take (float8, ...): one by one below
    # (also a float64 tensor on a float32-only device: it cannot be narrowed in the norm)
    return [torch.linalg.vector_norm(t.to(dtype), ord) for t in dense]


def _cpu_norms(dense: list[torch.Tensor], ord: float) -> list[torch.Tensor]:
    return list(_cpu_vector(dense, ord).unbind())


def _cpu_vector(dense: list[torch.Tensor], ord: float, widen: bool = True) -> torch.Tensor:
    return _cpu_checked(dense, ord, widen)[0]


def _cpu_checked(
    dense: list[torch.Tensor], ord: float, widen: bool = True
) -> tuple[torch.Tensor, bool]:
    """The CPU norms as one vector: the fused norm, one read of its few values (a CPU
    tensor: no device to wait for), and only the suspect ones taken again in float64;
    and whether none was suspect (every norm finite and nonzero, as read).
    `widen` False: float64 only where a value was suspect, else the fused norm's float32
    (its exact values: the recorder widens them with the rest of a flush)."""
    try:
        # float32 accumulation at least (half and bfloat16 are widened in the kernel)
        fast = torch._foreach_norm(dense, ord, dtype=None if _all_wide(dense) else torch.float32)
    except (RuntimeError, TypeError, NotImplementedError):
        return torch.stack([torch.linalg.vector_norm(t.double(), ord) for t in dense]), False
    values = torch.stack(fast)
    suspect = [i for i, v in enumerate(values.tolist()) if not 0 < v < math.inf]  # NaN too
    if widen or suspect:
        values = values.double()
    for i in suspect:
        if dense[i].dtype != torch.float64:
            values[i] = torch.linalg.vector_norm(dense[i], ord, dtype=torch.float64)
    return values, not suspect


def norm_vector(tensors: list[torch.Tensor], ord: float = 2.0) -> torch.Tensor:
    """`norms` stacked into one [len(tensors)] vector (at least one tensor); on the CPU
    float32 where every norm is a finite, nonzero float32 (see `_cpu_vector`)."""
    dense = [plain(t) for t in tensors]
    if dense[0].is_cpu:
        return _cpu_vector(dense, ord, widen=False)
    return torch.stack(norms(dense, ord))


def _all_wide(dense: list[torch.Tensor]) -> bool:
    """Every tensor float32 or float64 (no narrowing to ask for)."""
    return all(t.dtype in (torch.float32, torch.float64) for t in dense)


def _device(params: list[torch.Tensor]) -> torch.device:
    return params[0].device if params else torch.device("cpu")


def _full(n: int, device: torch.device) -> torch.Tensor:
    return torch.full((n,), NO_GRAD, device=device, dtype=accumulation(device))


class Measure:
    """Norm vectors laid out like `tracked.params`; -1 marks "not there"."""

    def __init__(self, tracked: Tracked) -> None:
        self.tracked = tracked
        self._present: dict[tuple[bool, ...], torch.Tensor] = {}
        self._subsets: dict[tuple[int, ...], torch.Tensor] = {}
        self._picks: dict[tuple[int, ...], torch.Tensor] = {}
        self.finite: torch.Tensor | None = None
        """The last CPU vector of `grads` whose every norm was read finite and nonzero
        as it was taken: the early NaN flag (nan_probe.early) does not read it again."""

    def grads(self, skip: frozenset[int] = frozenset()) -> torch.Tensor:
        """[P] gradient norms in `norm_vector`'s dtype (float64; on a CPU float32 where every
        norm was plain); -1 where grad is None or the position is in `skip` (another
        thread's parameters: see stepping.py). Each `.grad` is read once, so one that
        turns None meanwhile is never half seen."""
        params = self.tracked.params
        if skip:
            read = [None if i in skip else p.grad for i, p in enumerate(params)]
        else:
            read = [p.grad for p in params]
        grads = [g for g in read if g is not None]
        if len(grads) == len(params) and grads:  # the common case: two kernels
            dense = [plain(g) for g in grads]
            if not dense[0].is_cpu:
                return torch.stack(norms(dense))
            vector, clean = _cpu_checked(dense, 2.0, widen=False)
            self.finite = vector if clean else None
            return vector
        if not grads:
            return _full(len(params), _device(params))
        device = grads[0].device
        vector = norm_vector(grads)
        out = torch.full((len(params),), NO_GRAD, device=device, dtype=vector.dtype)
        present = tuple(g is not None for g in read)
        index = self._present.get(present)
        if index is None:
            index = torch.tensor([i for i, k in enumerate(present) if k], device=device)
            self._present[present] = index
        out[index] = vector.to(device)
        return out

    def weights(self) -> torch.Tensor:
        """[P] weight norms of every tracked parameter."""
        params = self.tracked.params
        return norm_vector(params) if params else _full(0, torch.device("cpu"))

    def positions(self, key: tuple[int, ...]) -> torch.Tensor:
        """`key` as a CPU index tensor, built once per subset."""
        index = self._picks.get(key)
        if index is None:
            index = self._picks[key] = torch.tensor(key)
        return index

    def scatter(self, params: list[torch.Tensor], values: list[torch.Tensor]) -> torch.Tensor:
        """[P] vector holding `values` (norms of `params`) at their tracked positions."""
        device = values[0].device if values else _device(params)
        out = _full(len(self.tracked.params), device)
        where = [self.tracked.index.get(id(p)) for p in params]
        keep = [(i, n) for i, n in zip(where, values, strict=True) if i is not None]
        if keep:
            key = tuple(i for i, _ in keep)
            index = self._subsets.get(key)
            if index is None:  # built once per optimizer: no host-to-device copy per step
                index = self._subsets[key] = torch.tensor(key, device=device)
            out[index] = torch.stack([n.to(device, out.dtype) for _, n in keep])
        return out
