"""Gradients an optimizer applies a second time: at its step, `.grad` holds the very
tensors its previous step applied, unchanged (same objects, same version counters), and
no backward ran since. A gradient written by hand only once (`if p.grad is None: p.grad =
g`, an estimate computed into a buffer that `.grad` no longer is) or a backward run once
before the loop leaves every later step applying the first one again (GS472). Weak
references only: no gradient is kept alive, and a freed one is a new one. They are taken
from an optimizer's first step with no backward since its previous one on (stepping.py):
a run whose every step has a backward of its own pays nothing per step."""

from __future__ import annotations

import weakref
from typing import Any

import torch

Applied = tuple[tuple[Any, int], ...]
"""(weak reference to a gradient, its version) for each gradient a step applied."""


def applied(params: list[torch.Tensor]) -> Applied:
    """At a step's end: the gradients it applied (those present)."""
    return tuple((weakref.ref(p.grad), p.grad._version) for p in params if p.grad is not None)


def again(before: Applied | None, params: list[torch.Tensor], calls: int) -> bool:
    """At a step's start with `calls` backward calls since the previous one: every
    gradient present is one the previous step applied, untouched since."""
    if calls or not before:
        return False
    now = [p.grad for p in params if p.grad is not None]
    if len(now) != len(before):
        return False
    return all(
        g is ref() and g._version == version for g, (ref, version) in zip(now, before, strict=True)
    )
