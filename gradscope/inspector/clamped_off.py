"""Parameters the loss reaches only through a clamp (or a max, a min) whose input is entirely
on the far side of its bound at this step: Dreamer's KL held at its free-nats floor
(`torch.clamp(kl, min=free_nats)`, `torch.maximum(kl, free)`) passes no gradient to the prior,
by design. Read in the graph, from the clamp's saved input and bound (the test of a node at
its bound is the watcher's, which reads the same floor over a run: clamped_terms.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from gradscope.inspector import weighted_off
from gradscope.stats import RunStats
from gradscope.watcher.clamped_terms import at_bound


def names(model: nn.Module, loss: torch.Tensor) -> tuple[str, ...]:
    """Parameters of `model` that every path from `loss` reaches through a clamp at its bound."""
    return weighted_off.names(model, loss, at_bound)


@dataclass(frozen=True)
class SwitchedOff:
    """The parameters the loss reaches only through a term switched off at this step."""

    weighted: tuple[str, ...]
    """Through a term weighted by 0 (weighted_off)."""
    clamped: tuple[str, ...]
    """Through a clamp at its bound."""

    def into(self, stats: RunStats) -> RunStats:
        return replace(stats, weighted_off=self.weighted, clamped_off=self.clamped)


def switched_off(model: nn.Module, loss: torch.Tensor) -> SwitchedOff:
    """Read before the backward frees the saved operands (those behind a zero-derivative
    op are read in every inspect's own walk: probe._graph_facts)."""
    return SwitchedOff(weighted_off.names(model, loss), names(model, loss))
