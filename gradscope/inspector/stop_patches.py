"""The patches that let the Stopper (script_stop.py) see a training script's backwards and
optimizer steps, installed for one run and removed after it: Tensor.backward and
torch.autograd.backward ask it first, every optimizer step and GradScaler.step is counted by
it (and refused once it stopped the script), and the stop raised again in a finaliser is kept
quiet."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from gradscope import taken_derivatives
from gradscope.inspector.script_stop import Stop, Stopper


@contextmanager
def installed(stopper: Stopper) -> Iterator[None]:
    """Patch backward, torch.autograd.backward, GradScaler.step and hook every optimizer's
    step for the run: the backwards before the one to stop at run as the script wrote them.
    The derivatives the script takes with create_graph are noted (a force field's forces)."""
    with (
        _backwards_patched(stopper),
        _steps_hooked(stopper),
        _stop_unraisable_quiet(),
        taken_derivatives.recorded() as stopper.derivatives,
    ):
        try:
            stopper.open()
            yield
        finally:
            stopper.disarm()


@contextmanager
def _backwards_patched(stopper: Stopper) -> Iterator[None]:
    """Tensor.backward and torch.autograd.backward ask the stopper first."""
    original_backward, original_autograd = torch.Tensor.backward, torch.autograd.backward
    depth = [0]  # a backward inside a running one (a reentrant checkpoint) is not the script's

    def run_original(run: Callable[[], None]) -> None:
        depth[0] += 1
        try:
            run()
        finally:
            depth[0] -= 1

    def backward(self: torch.Tensor, gradient: Any = None, *args: Any, **kw: Any) -> None:
        if depth[0] or not stopper.wants(self):
            return run_original(lambda: original_backward(self, gradient, *args, **kw))
        stopper.first_backward(self, gradient)

    def autograd_backward(tensors: Any, grad_tensors: Any = None, *args: Any, **kw: Any) -> None:
        listed = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        grads = [grad_tensors] if isinstance(grad_tensors, torch.Tensor) else grad_tensors
        if depth[0] or not stopper.wants(listed[0] if len(listed) == 1 else listed):
            return run_original(lambda: original_autograd(tensors, grad_tensors, *args, **kw))
        if len(listed) != 1 and not stopper.stopped:
            which = "first backward" if stopper.step is None else "backward to inspect"
            stopper.fail(
                f"the script's {which} takes several tensors; gradscope inspects one loss: "
                "sum them first"
            )
        stopper.first_backward(listed[0], grads[0] if grads else None)

    torch.Tensor.backward = backward  # type: ignore[method-assign]
    torch.autograd.backward = autograd_backward
    try:
        yield
    finally:
        torch.Tensor.backward = original_backward  # type: ignore[method-assign]
        torch.autograd.backward = original_autograd


@contextmanager
def _steps_hooked(stopper: Stopper) -> Iterator[None]:
    """Every optimizer step and GradScaler.step counted by the stopper, and refused once it
    stopped the script."""
    stepping: list[Any] = []  # the optimizer whose step hooks ran (in a GradScaler.step)

    def step_pre_hook(optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if stopper.stopped:
            stopper.refuse(f"{type(optimizer).__name__}.step()")
        stopper.check_gradients(optimizer)
        stepping.append(optimizer)

    def step_post_hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        stopper.step_done()

    scaler_class = torch.amp.GradScaler
    original_scaler_step = scaler_class.__dict__["step"]

    def scaler_step(scaler: Any, optimizer: Any, *args: Any, **kw: Any) -> Any:
        if stopper.stopped:
            stopper.refuse(f"{type(scaler).__name__}.step()")
        stepping.clear()
        out = original_scaler_step(scaler, optimizer, *args, **kw)
        if scaler.is_enabled() and not stepping:
            stopper.step_done()  # skipped (inf/NaN found): a step all the same, as watch counts
        return out

    handle = register_optimizer_step_pre_hook(step_pre_hook)
    post_handle = register_optimizer_step_post_hook(step_post_hook)
    scaler_class.step = scaler_step  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        handle.remove()
        post_handle.remove()
        scaler_class.step = original_scaler_step  # type: ignore[method-assign]


@contextmanager
def _stop_unraisable_quiet() -> Iterator[None]:
    """The stop raised again in a finaliser (a generator's close, a __del__) cannot leave it;
    Python would print it as "Exception ignored in ...": it is no news to anyone."""
    previous_unraisable = sys.unraisablehook

    def unraisable(info: Any) -> None:
        if not isinstance(info.exc_value, Stop):
            previous_unraisable(info)

    sys.unraisablehook = unraisable
    try:
        yield
    finally:
        sys.unraisablehook = previous_unraisable
