"""Copies of a trained model that the loss differentiates through to a trained network: a
target critic that values the state at the end of a differentiable rollout (SHAC's
terminal value), its input computed by the actor the optimizer steps. The gradient through
the copy to its input is the method's; what the backward adds to the copy's own `.grad` is
a by-product no step applies, and cutting the copy's output (no_grad, .detach()) would cut
the actor's gradient too.

Told at the forward with gradients on of a model that holds parameters and none an optimizer
holds (the models eval_passes hooks): once an optimizer has stepped and an input requires
grad, that input's graph is searched once, nearest first and bounded, for a leaf an
optimizer holds. A copy fed only data (a DQN target computed with gradients on) is never
searched: nothing it is fed carries a gradient. Whether the model copies a trained one is
the rule's to tell (rules/copies_of.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradscope.autograd_walk import NodeWalk, Order

LIMIT = 4096
"""Nodes searched at most: the trained network's last call sits near the copy's input."""


class CopiesThrough:
    def __init__(self, trained: Callable[[], set[int]]) -> None:
        self.trained = trained
        """The ids of the tensors the optimizers hold, read when a search starts."""
        self.decided: dict[int, frozenset[int]] = {}
        """id(copy) → the ids of its parameters where its input reached a trained tensor
        (empty: searched, and it did not)."""

    def note(self, copy: nn.Module, args: Any) -> None:
        """`copy` runs forward with gradients on, fed `args`."""
        if id(copy) in self.decided:
            return
        trained = self.trained()
        if not trained:
            return  # no optimizer has stepped yet: nothing to search for
        own = frozenset(id(p) for p in copy.parameters())
        if not own or own & trained:
            self.decided[id(copy)] = frozenset()  # a trained model (or no weights): not a copy
            return
        roots = [
            a.grad_fn
            for a in (args if isinstance(args, tuple) else (args,))
            if isinstance(a, torch.Tensor) and a.grad_fn is not None
        ]
        if not roots:
            return  # data alone: nothing to search, maybe a later call
        self.decided[id(copy)] = own if _reaches(roots, trained) else frozenset()

    def positions(self, index: dict[int, int]) -> tuple[int, ...]:
        """The tracked positions of the parameters of copies differentiated through."""
        return tuple(sorted(index[k] for ids in self.decided.values() for k in ids if k in index))


def _reaches(roots: list[Any], trained: set[int]) -> bool:
    for node in NodeWalk(roots, order=Order.NEAREST, limit=LIMIT):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor) and id(variable) in trained:
            return True
    return False


def trained_ids(optimizers: list[Any]) -> set[int]:
    """The ids of the tensors the optimizers hold."""
    return {id(p) for o in optimizers for g in getattr(o, "param_groups", ()) for p in g["params"]}
