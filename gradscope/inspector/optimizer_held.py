"""Which of a script's model parameters no optimizer holds at the measured backward.

A script trained in phases builds each phase's optimizer over the parameters that phase
trains (DeeBERT: the backbone and last classifier first, then the early exits alone). A
parameter outside every live optimizer, while one holds others of the same model, is not
trained at this step: its missing gradient is that phase's design, not a cut graph.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from gradscope.inspector.script_facts import unwrap_compiled
from gradscope.stats import RunStats
from gradscope.watcher.discover import live_optimizers


def noted(stats: RunStats, model: nn.Module) -> RunStats:
    """`stats` of one step of a script, with the parameters no optimizer held then."""
    return replace(stats, untrained=untrained(unwrap_compiled(model)))


def untrained(model: nn.Module) -> tuple[str, ...]:
    """Names of the model's parameters in no live torch.optim optimizer; () where no
    optimizer holds any of them (none built yet, or one for another model: not known)."""
    held = {
        id(p)
        for optimizer in live_optimizers()
        for group in optimizer.param_groups
        for p in group["params"]
        if isinstance(p, torch.Tensor)
    }
    named = list(model.named_parameters())
    if not any(id(p) in held for _, p in named):
        return ()
    return tuple(name for name, p in named if id(p) not in held)
