"""Gradients another optimizer keeps across a reset of the gradients between backward
calls: a reset that picks which backward trains which optimizer (a GAN's, GradNorm's)
wipes no micro-batch of an accumulation; one that leaves gradients from an earlier phase
as they were does. Told by the (id, version) of each optimizer's first gradient."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import Window


def kept_by_another(state: WatchState, window: Window, cleared: set[int]) -> bool:
    """Another optimizer (one holding none of the `cleared` parameters) keeps gradients
    across this reset that the calls since the window's previous such reset gave it: the
    reset picks which backward trains which optimizer (a GAN's `opt_d.zero_grad()` after
    the generator's backward, GradNorm's weights reset after the weighted task loss's
    backward), it wipes no micro-batch of an accumulation. A later reset whose calls
    before it left those gradients as they were (version counters, no device read) is a
    reset inside the cleared optimizer's own accumulation, and so is one whose other
    gradients are as they were at the window's first backward or its last reset
    (`reset_marks`): left from an earlier phase (a scorer's last backward before a fresh
    model's training)."""
    marks = []
    for optimizer in state.optimizers:
        if not isinstance(optimizer, torch.optim.Optimizer):
            continue
        params = [p for g in optimizer.param_groups for p in g["params"]]
        if any(id(p) in cleared for p in params):
            continue
        mark = _first_grad_mark(params)
        if mark is not None and mark != window.reset_marks.get(id(optimizer)):
            marks.append(mark)
    if not marks or tuple(marks) == window.kept_marks:
        return False
    window.kept_marks = tuple(marks)
    return True


def note_marks(state: WatchState, window: Window) -> None:
    """At a window's first backward and at each reset after it: each optimizer's first
    gradient as it is before the calls that follow (kept_by_another); one attribute read
    an optimizer where its first parameter holds a gradient. Only while one thread runs the
    hooks: another thread's backward or zero_grad may be freeing the gradient read."""
    window.reset_marks = {}
    if not state.threads.alone():
        return
    for optimizer in state.optimizers:
        if isinstance(optimizer, torch.optim.Optimizer):
            params = (p for g in optimizer.param_groups for p in g["params"])
            mark = _first_grad_mark(params)
            if mark is not None:
                window.reset_marks[id(optimizer)] = mark


def _first_grad_mark(params: Any) -> tuple[int, int] | None:
    """(id, version) of the first gradient among `params`; None: none has one."""
    grad = next((p.grad for p in params if p.grad is not None), None)
    return None if grad is None else (id(grad), grad._version)
