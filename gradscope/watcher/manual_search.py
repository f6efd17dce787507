"""What the search for updates by hand (manual.py) keeps between backward calls, in one
record (`ManualSearch`) that `WatchState.manual` holds: the patches that end the search
or ask whether it runs read it there, and only manual.py changes its inside. A module of
its own because WatchState holds it and manual.py imports WatchState."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.watcher import updates


class ManualUpdates:
    """Stands in `WatchState.optimizers` for parameter updates made by hand."""

    def __init__(self) -> None:
        self.param_groups: list[dict[str, Any]] = [{"params": []}]


@dataclass
class ManualCheck:
    """What the last backward left, for an update by hand that may follow it (manual.py)."""

    params: list[torch.Tensor]
    thread: int
    """The thread whose backward found them: the only one that checks."""
    weights: torch.Tensor | None = None
    versions: list[int] = field(default_factory=list)
    grads: torch.Tensor | None = None
    members: tuple[int, ...] = ()
    loss: torch.Tensor | None = None
    loss_known: bool = True
    calls: int = 0
    before: updates.Before | None = None
    """Measured steps: what the update is measured from (updates.py)."""
    kind: Any = None
    """The `LossKind` of the backward calls, where it was read."""
    eval_roots: frozenset[int] | None = None
    """The models in eval mode at the first of those backward calls (threads.Window)."""
    pending: bool = False
    """A backward ended since the last check."""
    driven: bool = False
    """That backward ran under an external minimiser's call (external_driver.py)."""


@dataclass
class ManualSearch:
    """The search for updates by hand, from the first backward to the first optimizer step."""

    check: ManualCheck | None = None
    """What the last backward left; None: nothing yet, or the search ended."""
    index: int | None = None
    """The `ManualUpdates` stand-in's index among the optimizers, from the first update."""
    scanned: bool = False
    """The first backward's parameters were looked for (or the search failed): not again."""
    threaded: bool = False
    """Ended when a second thread ran backward calls (manual.threaded)."""
    updated: set[int] = field(default_factory=set)
    """Positions of the parameters an update by hand changed."""
    strays: set[int] = field(default_factory=set)
    """Positions of what the first backward's scan found outside every model, still to be
    seen as a leaf of a later backward's graph (a weight is one of every step's)."""
    looks: int = 0
    """Later backward calls left to look at the strays in."""
    one_step: set[int] = field(default_factory=set)
    """Strays no later backward reached: one step's input made to require grad (an
    embedding output under gradient checkpointing, a batch for its own gradient)."""
