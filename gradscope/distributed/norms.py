"""Gradient norms that are right when gradients are FSDP2 (`fully_shard`) DTensor shards.

Each rank holds a shard; the norm of the full gradient is the square root of
the sum over ranks of the squared local shard norms. Taking a norm of the
local shard alone under-reports by about sqrt(shards); calling `.full_tensor()`
per parameter costs one collective each. Here: one fused local pass, one
all-reduce of the stacked squares, for every parameter at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from gradscope.distributed.context import Rank


def local(t: torch.Tensor) -> torch.Tensor:
    """The part of `t` this rank holds: a DTensor's local shard, else `t` itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) else t


def _real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real view (the same L2 norm); sparse as its values."""
    if t.is_sparse:
        t = t.coalesce().values()
    return torch.view_as_real(t) if t.is_complex() else t


def is_sharded(t: torch.Tensor) -> bool:
    """True for a DTensor with a Shard placement (each rank holds a different part)."""
    placements = getattr(t, "placements", ())
    return any(type(p).__name__ in ("Shard", "_StridedShard") for p in placements)


def squared_norms(tensors: Sequence[torch.Tensor | None]) -> torch.Tensor:
    """float64 squared L2 norm of each tensor's local part (0 for None), one fused pass."""
    present = [_real(local(t).detach()) for t in tensors if t is not None]
    out = torch.zeros(len(tensors), dtype=torch.float64)
    if present:
        # accumulated in float64 (no float32 overflow of finite elements; float64 and
        # complex gradients as they are); float32 only where the device has no float64
        if present[0].device.type == "mps":
            norms = [torch.linalg.vector_norm(t.float()) for t in present]
        else:
            norms = list(torch._foreach_norm(present, 2, dtype=torch.float64))
        values = torch.stack([n.double().cpu() for n in norms]) ** 2
        idx = torch.tensor([i for i, t in enumerate(tensors) if t is not None])
        out[idx] = values
    return out


@dataclass(frozen=True)
class GlobalNorms:
    """Per-parameter and total gradient L2 norms of the full (unsharded) gradients."""

    per_param: tuple[float, ...]
    total: float

    def clip_coefficient(self, max_norm: float, eps: float = 1e-6) -> float:
        """The factor `clip_grad_norm_` applies: min(1, max_norm / (total + eps))."""
        return min(1.0, max_norm / (self.total + eps))


def global_grad_norms(
    grads: Sequence[torch.Tensor | None], rank: Rank | None, sharded: Sequence[bool]
) -> GlobalNorms:
    """Norms of the full gradients: sharded ones summed over ranks (one all-reduce),
    replicated ones (DDP, or a DTensor with Replicate) taken as they are on this rank."""
    squares = squared_norms(grads)
    mask = torch.tensor(list(sharded), dtype=torch.bool)
    if rank is not None and bool(mask.any()):
        summed = rank.all_reduce(squares * mask, "gradient norms")
        squares = torch.where(mask, summed.cpu(), squares)
    per = squares.sqrt().tolist()
    return GlobalNorms(tuple(per), math.sqrt(float(squares.sum())))
