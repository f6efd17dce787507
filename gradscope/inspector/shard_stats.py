"""Whole-tensor statistics from FSDP2 (`fully_shard`) shards: each rank measured its own
part, and the parts' numbers combine into the whole tensor's."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from gradscope.distributed import context, norms

Column = tuple[list[float | None], str]
"""One statistic per tensor, and how its parts combine (a key of COMBINE)."""


@dataclass
class Shards:
    """L2 norms combine as the root of the summed squares, min and max as the min and max,
    zero counts as the sum. One all_gather per call, made by every rank in the same order
    (every decision before a call rests on values already combined). Replicated tensors,
    like everything outside torchrun, are left as this rank measured them."""

    rank: context.Rank
    weight_sharded: list[bool]
    grad_sharded: list[bool]

    @classmethod
    def of(cls, params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor]) -> Shards | None:
        """The shards of these tensors; None where none is sharded, or outside torchrun."""
        weight_sharded = [norms.is_sharded(p) for p in params]
        grad_sharded = [norms.is_sharded(g) for g in grads]
        if not any(weight_sharded + grad_sharded):
            return None
        rank = context.current()
        return None if rank is None else cls(rank, weight_sharded, grad_sharded)

    def weights(self, columns: list[Column], at: Sequence[int]) -> None:
        self._combine(columns, at, self.weight_sharded)

    def grads(self, columns: list[Column], at: Sequence[int]) -> None:
        self._combine(columns, at, self.grad_sharded)

    def _combine(self, columns: list[Column], at: Sequence[int], sharded: list[bool]) -> None:
        """Entries `at` of each column, combined over the ranks in place (None stays None: the
        same entries are unmeasured on every rank)."""
        flat = [math.nan if values[i] is None else values[i] for values, _ in columns for i in at]
        every = self.rank.all_gather(torch.tensor(flat, dtype=torch.float64), "inspect statistics")
        ranks = every.cpu().T.tolist()  # one row per entry, one value per rank
        row = iter(ranks)
        for values, how in columns:
            for i in at:
                each = next(row)
                if values[i] is not None and sharded[i]:
                    values[i] = COMBINE[how](each)


COMBINE: dict[str, Callable[[list[float]], float]] = {
    "l2": lambda each: math.sqrt(sum(v * v for v in each)),
    "min": lambda each: math.nan if any(map(math.isnan, each)) else min(each),
    "max": lambda each: math.nan if any(map(math.isnan, each)) else max(each),
    "sum": sum,
}
"""How one statistic of a tensor's parts makes the whole tensor's (NaN and Inf carry)."""
