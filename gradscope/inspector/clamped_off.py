"""Parameters the loss reaches only through a clamp (or a max, a min) whose input is entirely
on the far side of its bound at this step: Dreamer's KL held at its free-nats floor
(`torch.clamp(kl, min=free_nats)`, `torch.maximum(kl, free)`) passes no gradient to the prior,
by design. Read in the graph, from the clamp's saved input and bound."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from gradscope.inspector import flat_off, weighted_off
from gradscope.stats import RunStats


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
    flat: tuple[tuple[str, str], ...] = ()
    """(parameter, op): through a zero-derivative op or a custom Function (flat_off)."""

    def into(self, stats: RunStats) -> RunStats:
        return replace(
            stats, weighted_off=self.weighted, clamped_off=self.clamped, flat_off=self.flat
        )


def switched_off(model: nn.Module, loss: torch.Tensor) -> SwitchedOff:
    """Read before the backward frees the saved operands."""
    return SwitchedOff(
        weighted_off.names(model, loss), names(model, loss), flat_off.names(model, loss)
    )


def at_bound(node: Any) -> bool:
    """The clamp, max or min this node differentiates is a floor (or ceiling) on a loss term,
    a reduced quantity, and passes no gradient to it."""
    return _on_a_term(node) and _passes_none(node)


def _on_a_term(node: Any) -> bool:
    """Its input is a reduced quantity (one number, or a mean or sum over a batch): a floor
    on a loss term. An activation clamped elementwise (`h.clamp(min=0)` as a ReLU) all on the
    far side is a dead layer, which GS106 keeps warning of."""
    name = node.name()
    if not name.startswith(("Clamp", "Maximum", "Minimum")):
        return False
    try:
        x = node._saved_self
    except (AttributeError, RuntimeError):
        return False
    made_by = [n.name() for n, _ in node.next_functions if n is not None]
    return x.numel() == 1 or any(n.startswith(("MeanBackward", "SumBackward")) for n in made_by)


def _passes_none(node: Any) -> bool:
    name = node.name()
    try:
        if name.startswith("ClampMinBackward"):
            return _all(node._saved_self < node._saved_min)
        if name.startswith("ClampMaxBackward"):
            return _all(node._saved_self > node._saved_max)
        if name.startswith("ClampBackward"):
            low, high = node._saved_min, node._saved_max
            x = node._saved_self
            return (low is not None and _all(x < low)) or (high is not None and _all(x > high))
        if name.startswith(("MaximumBackward", "MinimumBackward")):
            return _bounded_by_constant(node, name.startswith("Maximum"))
    except RuntimeError:  # its saved operands already freed
        return False
    return False


def _bounded_by_constant(node: Any, maximum: bool) -> bool:
    """max(x, c) with x below c everywhere (min: above), c carrying no gradient."""
    nexts = [n for n, _ in node.next_functions]
    if len(nexts) != 2 or (nexts[0] is None) == (nexts[1] is None):
        return False
    x, c = (node._saved_self, node._saved_other)
    if nexts[0] is None:
        x, c = c, x
    return _all(x < c) if maximum else _all(x > c)


def _all(below: Any) -> bool:
    return bool(torch.as_tensor(below).all()) if torch.as_tensor(below).numel() else False
