"""Copies of a trained model that run forward without gradients while the script moves
them: an EMA teacher (DINO, BYOL, Mean Teacher, MoCo's key encoder) or a target network
synced from the model. Their outputs are the loss's targets, and they move as the model
learns, so the loss's level says nothing alone (DINO's cross-entropy rises as the
teacher's centred targets spread out). A frozen copy (a fixed teacher, a reference
model) makes targets that hold still: it is found, but not counted.

A copy is found once, among the live modules of the first step's scan (frozen_norms'): of
the same class, with the same parameter names and shapes, and none of the trained model's
own tensors. Whether it moved is read from its parameters' norms (float64, one scalar per
tensor, on its device) at its first forward without gradients and at the sampled steps
after it, compared once as the run ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from gradscope.watcher import discover
from gradscope.watcher.hand_moved import fingerprints
from gradscope.watcher.same_batch import wanted


def copies_of(
    roots: Iterable[nn.Module], modules: Iterable[nn.Module]
) -> list[tuple[nn.Module, nn.Module]]:
    """(copy, the root it copies) for the `modules` outside `roots` that copy one of them."""
    shapes: dict[type, list[tuple[list[tuple[str, tuple[int, ...]]], set[int], nn.Module]]] = {}
    inside: set[int] = set()
    for root in roots:
        model = discover.unwrapped(root)
        shapes.setdefault(type(model), []).append((_layout(model), _tensors(model), model))
        inside.update(id(m) for m in root.modules())
    if not shapes:
        return []
    found = []
    for m in modules:
        kind = shapes.get(type(m))
        if kind is None or id(m) in inside:
            continue
        layout = _layout(m)
        mine = _tensors(m)
        original = next((r for lay, own, r in kind if layout == lay and not mine & own), None)
        if layout and original is not None:
            found.append((m, original))
    return found


def _layout(model: nn.Module) -> list[tuple[str, tuple[int, ...]]]:
    return [(n, tuple(p.shape)) for n, p in model.named_parameters()]


def _tensors(model: nn.Module) -> set[int]:
    return {id(p) for p in model.parameters()}


CopyState = tuple[str, str, tuple[int, ...], bool]


@dataclass
class MovingCopies:
    """Per copy: its parameters' norms at its first forward without gradients and at the
    last sampled step's, and the optimizer steps at which it ran so."""

    first: dict[int, list[tuple[list[int], Any]]] = field(default_factory=dict)
    last: dict[int, list[tuple[list[int], Any]]] = field(default_factory=dict)
    steps: dict[int, set[int]] = field(default_factory=dict)
    originals: dict[int, tuple[nn.Module, str, str]] = field(default_factory=dict)
    """Per copy: the trained model it copies, and the names the script gives both."""

    def ran(self, copy: nn.Module, step: int) -> None:
        """`copy` ran forward without gradients with `step` optimizer steps taken."""
        key = id(copy)
        seen = self.steps.setdefault(key, set())
        if step in seen:
            return
        seen.add(step)
        if key not in self.first:
            self.first[key] = fingerprints(list(copy.parameters()))
        elif wanted(step):
            self.last[key] = fingerprints(list(copy.parameters()))

    def moved_steps(self) -> int:
        """The most steps at which one copy that moved between its forwards ran without
        gradients (one host read per copy, as the run ends)."""
        most = 0
        for key, last in self.last.items():
            first = self.first[key]
            if len(first) == len(last) and any(
                a == b and bool((x != y).any()) for (a, x), (b, y) in zip(first, last, strict=True)
            ):
                most = max(most, len(self.steps[key]))
        return most

    def states(self, index: dict[int, int]) -> tuple[CopyState, ...]:
        """(the copy's name, its model's name, positions in `index` of that model's
        parameters, whether the copy changed) for each copy that ran without gradients at
        two sampled steps or more (one host read per copy): an EMA teacher or a synced
        target moves, a target network nothing updates does not."""
        out = []
        for key, last in self.last.items():
            first, original = self.first[key], self.originals.get(key)
            if original is None or len(first) != len(last):
                continue
            moved = any(
                a != b or bool((x != y).any()) for (a, x), (b, y) in zip(first, last, strict=True)
            )
            model, name, model_name = original
            at = tuple(index[id(p)] for p in model.parameters() if id(p) in index)
            if at:
                out.append((name, model_name, at, moved))
        return tuple(out)
