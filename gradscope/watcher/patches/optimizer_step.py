"""Every step of any Optimizer (plain loops, HF Trainer, Lightning, accelerate) through
torch's global step pre- and post-hooks: no per-instance patch.

A step given a closure (`optimizer.step(closure)`: LBFGS, Lightning's automatic
optimization) gets the closure wrapped by the pre-hook: the step's statistics are taken
when its first evaluation returns (its loss, the gradients it left, a clip it did), not
before the closure ran; LBFGS's further evaluations count only in the run's backward
calls. A step inside a step (super().step(), a wrapped optimizer) is the outer one's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from gradscope.untraced import untraced
from gradscope.watcher import resets, stepping
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState

PRE = "the optimizer's pre-step hook"
POST = "the optimizer's post-step hook"


class OptimizerStep:
    """The two global hooks, registered by `install` and removed by `remove`."""

    def __init__(self, state: WatchState) -> None:
        self.state = state
        self.handles: list[Any] = []

    def install(self) -> None:
        self.handles = [
            register_optimizer_step_pre_hook(untraced(self.pre_step)),
            register_optimizer_step_post_hook(untraced(self.post_step)),
        ]

    def remove(self) -> None:
        while self.handles:
            self.handles.pop().remove()

    def pre_step(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        state = self.state
        here = enter(state)
        if here is None:
            return None
        here.step_depth += 1
        if here.step_depth > 1 or here.quiet:
            return None  # a step inside a step (super().step(), a wrapped optimizer)
        safely(
            state, here, PRE, lambda: state.hand_moved.before_step(optimizer, state.tracked.index)
        )
        safely(state, here, PRE, lambda: state.mirrored.before_step(optimizer))
        safely(
            state,
            here,
            PRE,
            lambda: state.same_grads.before_step(
                optimizer, state.steps + 1, state.backward_total, resets.written_since(here.window)
            ),
        )
        safely(state, here, PRE, lambda: state.dropped.step_starts(state.tracked.index))
        closure, where = _closure(args, kwargs)
        if closure is None:
            safely(state, here, PRE, lambda: stepping.begin(state, here, optimizer, skipped=False))
            return None
        wrapped = _wrap_closure(state, here, optimizer, closure)
        if where == "kwargs":
            return args, {**kwargs, "closure": wrapped}
        return (args[0], wrapped, *args[2:]), kwargs

    def post_step(self, optimizer: Any, args: Any, _kwargs: Any) -> None:
        state = self.state
        here = enter(state)
        if here is None:
            return
        here.step_depth = max(0, here.step_depth - 1)
        if here.step_depth or here.quiet:
            return  # the end of a step inside a step: the outer one's end records it
        safely(state, here, POST, lambda: _end_step(state, here, optimizer))


def _end_step(state: WatchState, here: ThreadState, optimizer: Any) -> None:
    if here.current is None:  # a closure that was never evaluated
        stepping.begin(state, here, optimizer, skipped=False)
    stepping.finish(state, here, optimizer)
    state.hand_moved.after_step(optimizer, state.steps)


def _wrap_closure(
    state: WatchState, here: ThreadState, optimizer: Any, closure: Callable[..., Any]
) -> Callable[..., Any]:
    evaluations = [0]

    def closure_(*a: Any, **kw: Any) -> Any:
        evaluations[0] += 1
        if evaluations[0] > 1 or here.current is not None:
            here.quiet += 1
            try:
                return closure(*a, **kw)
            finally:
                here.quiet -= 1
        earlier = here.window.calls
        try:
            out = closure(*a, **kw)
        except BaseException:
            here.stepping = None
            raise
        # backward calls before the closure (Lightning's accumulate_grad_batches runs all but
        # the last micro-batch outside it): the closure's value is its own micro-batch's
        # loss, the step's is the sum of every call's (the window's)
        returned = out if not earlier else None
        safely(
            state,
            here,
            "the hook on the step's closure",
            lambda: stepping.begin(state, here, optimizer, skipped=False, returned=returned),
        )
        return out

    here.stepping = optimizer
    return closure_


def _closure(args: Any, kwargs: Any) -> tuple[Callable[..., Any] | None, str]:
    """The closure given to `optimizer.step` (args include the optimizer first)."""
    if isinstance(kwargs, dict) and callable(kwargs.get("closure")):
        return kwargs["closure"], "kwargs"
    if isinstance(args, tuple) and len(args) > 1 and callable(args[1]):
        return args[1], "args"
    return None, ""
