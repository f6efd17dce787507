"""Which of a window's backward calls a step applies, and so their count and loss: not
those before a reset that cleared every gradient they gave (`Window.wipe`), nor, for one
optimizer, those before a zero_grad that found none of its parameters holding a gradient
(`Window.unreached`). Such calls trained other parameters or none: a data-pruning score's
backward per example on a scorer, each after the scorer's zero_grad, then a fresh model's
first step with a fresh optimizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from gradscope.watcher import resets
from gradscope.watcher.threads import Window


@dataclass(frozen=True)
class Applied:
    calls: int
    loss: torch.Tensor | None
    wiped: int | None
    """The leading calls whose gradients of this step's parameters a reset cleared before
    the later calls (GS435); None: none."""


def applied(window: Window, optimizer: Any, written: bool = False) -> Applied:
    """The calls of `window` whose gradients `optimizer`'s step applies. `written`: an
    optimizer's wrapper wrote the step's gradients from its own sum (wrapped_steps.py):
    it applies every call, whatever reset came between them (Opacus accumulates across
    zero_grad)."""
    if written:
        return Applied(window.calls, _wrapped_loss(window), None)
    if not window.unreached and not wipe_holds(window):
        return Applied(window.calls, window.whole_loss(), None)  # most steps: every call
    ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
    since = _unreached_since(window, ids)
    if since is not None:
        calls, before = since
        loss = window.loss
        if loss is not None and before is not None:
            loss = loss - before
        return Applied(window.calls - calls, loss, None)
    if not wipe_holds(window):
        return Applied(window.calls, window.whole_loss(), None)
    if ids & window.wiped_ids:
        return Applied(window.calls, window.loss, window.wiped)
    return Applied(window.calls - window.wiped, window.loss, None)


def _wrapped_loss(window: Window) -> torch.Tensor | None:
    """Where the wrapper's calls had resets between them, their mean: the wrapper scales
    its sum itself (Opacus by the logical batch), and a step after the first of its resets
    counts all its physical batches where the first counts one; the first call's where
    the wiped calls kept their graph, passes over one forward (ghost clipping: the loss,
    then its per-sample terms reweighted by their clip factors). Else their sum."""
    whole = window.whole_loss()
    if whole is None or window.calls <= 1 or not window.wiped:
        return whole
    one_forward = window.retained >= window.wiped and window.first is not None
    return window.first if one_forward else whole / window.calls


def wipe_holds(window: Window) -> bool:
    """A reset between the window's calls cleared every gradient the calls before it gave
    (no other optimizer kept one, none was written back by hand): a step applies only the
    calls after it."""
    return 0 < window.wiped < window.calls and not resets.written_by_hand(window)


def _unreached_since(window: Window, ids: set[int]) -> tuple[int, torch.Tensor | None] | None:
    """(calls, summed loss) at the last zero_grad since the window's last wipe that found
    none of these parameters holding a gradient, with calls after it; None: none was."""
    found = None
    for reset, calls, loss in window.unreached:
        if ids <= reset and calls < window.calls and (found is None or calls > found[0]):
            found = (calls, loss)
    return found
