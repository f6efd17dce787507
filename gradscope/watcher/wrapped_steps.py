"""Steps whose gradients an optimizer wrapper wrote from its own buffer.

A wrapper that is itself an optimizer and holds the one that steps can keep its own sum of
the micro-batches' gradients: Opacus's DPOptimizer clips each backward's per-sample
gradients into `p.summed_grad`, skips its step until a logical batch is complete (its
BatchMemoryManager splits one into physical batches, with a `zero_grad()` after each that
clears `.grad` and keeps the sum), then assigns `.grad` from that sum, with noise, just
before the inner step. The resets gradscope sees between those backward calls wipe
nothing the step applies. Two readings together say so, with no class name: the inner
step runs inside another optimizer's `step()` that holds it, and the parameters' `.grad`
is no longer the tensor the last backward left (assigned since). A wrapper that passes
`.grad` through (accelerate's AcceleratedOptimizer) leaves that tensor in place, and a
reset inside its accumulation still wipes."""

from __future__ import annotations

import sys
from typing import Any

import torch

from gradscope.watcher.threads import Window

_FRAMES = 24
"""Frames above the caller looked at: the wrapper's step() calls the inner one directly,
under torch's own step wrappers (profiling, the hooks) and the watch's own calls."""


def written_by_wrapper(window: Window, optimizer: Any) -> bool:
    """The step's gradients were assigned since its last backward, inside the step() of an
    optimizer that holds `optimizer` (the stack is walked only where `.grad` was
    assigned: a plain loop's step finds the tensor its backward left)."""
    if not _assigned_since_backward(window):
        return False
    return wrapper_stepping(optimizer) is not None


def _assigned_since_backward(window: Window) -> bool:
    """The sentinel's `.grad` is a tensor the window's last backward did not leave."""
    sentinel, left = window.sentinel, window.left
    if sentinel is None:
        return False
    grad = sentinel.grad
    return grad is not None and (left is None or grad is not left())


def wrapper_stepping(optimizer: Any) -> Any:
    """The optimizer whose step() is running and holds `optimizer` as an attribute (None:
    the step was called by the script, or by a scaler or trainer that is no optimizer)."""
    frame = sys._getframe(1)
    for _ in range(_FRAMES):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None
        if frame.f_code.co_name != "step":
            continue
        owner = frame.f_locals.get("self")
        if owner is optimizer or not isinstance(owner, torch.optim.Optimizer):
            continue
        if any(value is optimizer for value in getattr(owner, "__dict__", {}).values()):
            return owner
    return None
