"""A gradient written by hand after an accumulation's reset (GS435's `rewritten`): the
step's `.grad` is a new tensor, and whether it is only the last backward call's gradient
scaled (that call alone reaches the update: the wipe stands) or something else (simulated
workers' gradients, each read before its reset, combined)."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher.resets import assigned_since
from gradscope.watcher.threads import Window


def combined_by_hand(window: Window) -> bool:
    """At a step after a wipe: `.grad` was assigned a new tensor that is not the last call's
    gradient scaled (`p.grad = p.grad / 2` keeps one micro-batch; a majority vote of the
    signs each call left, read before each reset, is no multiple of the last one's). One
    parameter, one read, only at such steps. Tensors it cannot compare as plain real ones
    (sparse, complex, on two devices) stay a wipe."""
    if not assigned_since(window) or not _comparable(window.last, window.sentinel.grad):
        return False
    a = window.last.detach().float().flatten()
    b = window.sentinel.grad.detach().float().flatten()
    dot, norm = float(a @ b), float(torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b))
    return not (norm > 0 and abs(dot) >= (1 - PARALLEL) * norm)


PARALLEL = 1e-4
"""How far from 1 the cosine of a multiple of a float32 gradient with it can read (rounding);
a sign or top-k compression of it, or a vote of several, is far below."""


def _comparable(a: Any, b: Any) -> bool:
    """Two dense real floating tensors of one shape on one device."""
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.layout == b.layout == torch.strided
        and a.is_floating_point()
        and b.is_floating_point()
        and a.shape == b.shape
        and a.device == b.device
    )
