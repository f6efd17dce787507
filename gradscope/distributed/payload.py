"""What each rank sends at a gathering, by name: one float64 vector, the same length on
every rank (`pack`), and the gathered [world, L] matrix cut back into its parts (`Gathered`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

HEAD = ("forwards", "steps", "local_sq", "grad_sq")
"""A rank's totals, first in its vector: training forwards, optimizer steps, and the two
squared gradient norms of `ParamColumn` summed over its parameters."""


class ParamColumn(enum.IntEnum):
    """The numbers sent for each parameter, in their order."""

    WEIGHT_SUM = 0
    WEIGHT_L2 = 1
    GRAD_SUM = 2
    GRAD_L2 = 3
    LOCAL_SQ = 4
    """Squared L2 of the local gradient, before the all-reduce (NaN: not measured)."""
    GRAD_SQ = 5
    """Squared L2 of this rank's part of the synchronised gradient (-1: no gradient)."""
    ARRIVALS = 6
    """How many times its gradient arrived in the sampled backward."""
    CAUSE = 7
    """Why it got none: an index of session.CAUSES (0: it got its gradient)."""


class GradColumn(enum.IntEnum):
    """A rank's gradient stash (`Session.grad_stash`), one row per parameter: taken
    where the gradients are the synchronised ones (before the update), sent at the next
    gathering as `ParamColumn.GRAD_SQ`, `GRAD_SUM` and `GRAD_L2`."""

    SQ = 0
    """Squared L2 of the local gradient part (-1: no gradient)."""
    SUM = 1
    L2 = 2
    """NaN in SUM and L2: no gradient."""


FINGERPRINTS = slice(ParamColumn.WEIGHT_SUM, ParamColumn.GRAD_L2 + 1)
"""Weight sum and L2, gradient sum and L2: what replicas must agree on."""
BUFFER_NUMBERS = 2
"""Sum and L2 of each buffer."""


def pack(forwards: int, steps: int, params: torch.Tensor, buffers: torch.Tensor) -> torch.Tensor:
    """One rank's vector: HEAD, then `params` ([n, len(ParamColumn)]), then `buffers`
    ([n_buffers, BUFFER_NUMBERS])."""
    local_sq = float(params[:, ParamColumn.LOCAL_SQ].sum())
    grad_sq = float(params[:, ParamColumn.GRAD_SQ].sum())
    head = torch.tensor([forwards, steps, local_sq, grad_sq], dtype=torch.float64)
    return torch.cat([head, params.flatten(), buffers.double().flatten()])


@dataclass(frozen=True)
class Gathered:
    """Every rank's vector cut into its parts, one row (the first dimension) per rank."""

    forwards: torch.Tensor
    steps: torch.Tensor
    local_sq: torch.Tensor
    grad_sq: torch.Tensor
    params: torch.Tensor
    """[world, n, len(ParamColumn)]."""
    buffers: torch.Tensor
    """[world, n_buffers, BUFFER_NUMBERS]."""

    @classmethod
    def cut(cls, rows: torch.Tensor, n_params: int, n_buffers: int) -> Gathered:
        world, end = rows.shape[0], len(HEAD) + n_params * len(ParamColumn)
        forwards, steps, local_sq, grad_sq = rows[:, : len(HEAD)].T
        return cls(
            forwards,
            steps,
            local_sq,
            grad_sq,
            rows[:, len(HEAD) : end].reshape(world, n_params, len(ParamColumn)),
            rows[:, end:].reshape(world, n_buffers, BUFFER_NUMBERS),
        )

    def column(self, c: ParamColumn) -> torch.Tensor:
        """[world, n]: one number of every parameter on every rank."""
        return self.params[:, :, c]
