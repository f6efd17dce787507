"""Derivatives taken without create_graph, then differentiated again: a Hessian-vector
product (influence functions' LiSSA or conjugate gradients), a gradient penalty or an
inner step whose first `torch.autograd.grad` lacks create_graph=True comes back outside the
graph, and the second call fails with autograd's "element 0 of tensors does not require
grad" (or `.backward()` of their product with a vector, with "does not require grad").
Kept: the last such call's results (weakly) and its inputs' ids; read only when a later
call fails."""

from __future__ import annotations

import weakref
from typing import Any

import torch


class Uncreated:
    """The last torch.autograd.grad call made without create_graph."""

    def __init__(self) -> None:
        self.results: dict[int, weakref.ref[torch.Tensor]] = {}
        self.inputs: frozenset[int] = frozenset()
        self.direct = False
        """The failing call differentiated that call's results themselves (`explains`)."""

    def plain(self, inputs: Any, results: Any) -> None:
        """A call without create_graph returned `results` for `inputs`."""
        self.results = {id(t): weakref.ref(t) for t in _tensors(results)}
        self.inputs = frozenset(id(t) for t in _tensors(inputs))

    def explains(self, outputs: Any, inputs: Any) -> bool:
        """A call on `outputs` with no graph (grad mode on) failed, and they are that call's
        results, or it differentiates against the same variables (a product of those
        results with a vector, summed): the derivative of a derivative taken outside the
        graph."""
        outs = _tensors(outputs)
        if not outs or any(t.requires_grad for t in outs) or not torch.is_grad_enabled():
            return False
        if any((ref := self.results.get(id(t))) is not None and ref() is t for t in outs):
            self.direct = True
            return True
        return bool(self.inputs) and frozenset(id(t) for t in _tensors(inputs)) == self.inputs

    def held(self) -> bool:
        """Some results of that call are still alive and no backward ended since (`clear`):
        a loss with no graph made now may be made from them."""
        return any(ref() is not None for ref in self.results.values())

    def clear(self) -> None:
        """A backward ended: what the script differentiates next is not that call's."""
        self.results = {}


def _tensors(value: Any) -> list[torch.Tensor]:
    many = (value,) if isinstance(value, torch.Tensor) else value
    if not isinstance(many, (tuple, list)):
        return []
    return [t for t in many if isinstance(t, torch.Tensor)]
