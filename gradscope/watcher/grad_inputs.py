"""Leaves the script differentiates against with `torch.autograd.grad` (IRMv1's dummy
classifier scale, a saliency map's input): the variables of a derivative the script reads
itself, not weights to train. A `backward()` of a loss that holds that derivative also adds
to their `.grad`, a by-product nothing reads: GS411 tells it as information."""

from __future__ import annotations

import weakref
from typing import Any

import torch

LIMIT = 256
"""Distinct leaves kept at most (a fresh input per step would otherwise pile up)."""


class GradInputs:
    """id → a weak reference to each leaf named in `inputs` of an autograd.grad call."""

    def __init__(self) -> None:
        self.refs: dict[int, weakref.ref[torch.Tensor]] = {}

    def note(self, inputs: Any) -> None:
        """The leaves among `inputs` (a tensor or a sequence of them)."""
        many = (inputs,) if isinstance(inputs, torch.Tensor) else inputs
        for t in many if isinstance(many, (tuple, list)) else ():
            if len(self.refs) >= LIMIT:
                return
            if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is None:
                self.refs[id(t)] = weakref.ref(t)

    def holds(self, tensor: torch.Tensor) -> bool:
        """The script took a derivative with respect to this very tensor."""
        ref = self.refs.get(id(tensor))
        return ref is not None and ref() is tensor
