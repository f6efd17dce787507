"""`torch.autograd.grad`: which leaves the script differentiates against (grad_inputs.py),
and the derivatives it takes into the graph (taken_derivatives.py); the call itself runs
unchanged."""

from __future__ import annotations

import sys
from typing import Any

import torch

from gradscope.errors import is_own_file
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState

PART = "the autograd.grad() hook"


class AutogradGrad(Patch):
    name = "grad"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.autograd)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def grad(outputs: Any, inputs: Any, *args: Any, **kw: Any) -> Any:
            here = enter(state)
            if here is not None and not here.depth:
                safely(state, here, PART, lambda: state.grad_inputs.note(inputs))
            try:
                results = original(outputs, inputs, *args, **kw)
            except RuntimeError:
                if here is not None and not here.depth:
                    safely(state, here, PART, lambda: _failed(state, outputs, inputs))
                raise
            if here is not None and not here.depth and _create_graph(args, kw):
                safely(state, here, PART, lambda: state.derivatives.note(outputs, results))
            elif here is not None and not here.depth:
                state.released_by_grad |= not _retain_graph(args, kw)
                if "create_graph" in kw and not _retain_graph(args, kw):
                    safely(state, here, PART, lambda: _note_eval(state))
                safely(state, here, PART, lambda: _plain(state, outputs, inputs))
                safely(state, here, PART, lambda: state.uncreated.plain(inputs, results))
            return results

        return grad


def _plain(state: WatchState, outputs: Any, inputs: Any) -> None:
    """A derivative taken without create_graph: the leaves its output reaches, and, taken
    with respect to inputs, the output's nodes (a force loss on it: GS467)."""
    state.plain_derivatives.note(outputs, inputs)
    if _of_inputs(inputs):
        state.derivatives.note_plain(outputs, inputs)


def _note_eval(state: WatchState) -> None:
    """The call is made in a method of a module in eval mode, which gave create_graph as
    a keyword: create_graph=self.training (NequIP's GradientOutput, MACE's forces) left
    False by a validation pass's eval() that no train() undid."""
    frame = sys._getframe(1)
    while frame.f_back is not None and is_own_file(frame.f_code.co_filename):
        frame = frame.f_back  # gradscope's own wrappers, up to the script's call
    caller = frame.f_locals.get("self")
    state.released_in_eval |= isinstance(caller, torch.nn.Module) and not caller.training


def _create_graph(args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    """autograd.grad's create_graph, given by keyword or third after outputs and inputs."""
    return bool(kw.get("create_graph", args[2] if len(args) > 2 else False))


def _retain_graph(args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    """autograd.grad's retain_graph (by keyword or second after outputs and inputs); its
    default, create_graph, is False here."""
    return bool(kw.get("retain_graph", args[1] if len(args) > 1 else False))


def _failed(state: WatchState, outputs: Any, inputs: Any) -> None:
    """The call raised: on outputs with no graph while grad mode is off, the forward that
    made them built none (an evaluation under torch.no_grad() that takes forces): GS461;
    with it on, on the derivative of a derivative taken without create_graph: GS474."""
    if state.uncreated_at is None and state.uncreated.explains(outputs, inputs):
        state.uncreated_at = state.steps + 1
    many = (outputs,) if isinstance(outputs, torch.Tensor) else outputs
    tensors = (
        [t for t in many if isinstance(t, torch.Tensor)] if isinstance(many, (tuple, list)) else []
    )
    if state.grad_off_at is None and not torch.is_grad_enabled():
        if tensors and not any(t.requires_grad for t in tensors):
            state.grad_off_at, state.grad_off_derivative = state.steps + 1, True


def _of_inputs(inputs: Any) -> bool:
    """A derivative taken with grad mode on with respect to something other than weights (a
    force field's positions), not a gradient read for a log or a per-task surgery."""
    many = (inputs,) if isinstance(inputs, torch.Tensor) else inputs
    listed = list(many) if isinstance(many, (tuple, list)) else []
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter) for t in listed
    )
