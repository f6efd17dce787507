"""`Tensor.backward` and `torch.autograd.backward`: each top-level backward call's start
and end (backward_calls.py); a backward inside one (a reentrant checkpoint) only runs."""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher import backward_calls
from gradscope.watcher.guard import enter, safely
from gradscope.watcher.patches.base import Patch
from gradscope.watcher.state import WatchState
from gradscope.watcher.threads import ThreadState

PART = "the backward() hook"


class TensorBackward(Patch):
    name = "backward"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.Tensor)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def backward(tensor: torch.Tensor, gradient: Any = None, *args: Any, **kw: Any) -> Any:
            here = enter(state)
            if here is None or here.depth:
                return original(tensor, gradient, *args, **kw)
            return _counted(
                state,
                here,
                [tensor],
                tensor,
                gradient,
                lambda: original(tensor, gradient, *args, **kw),
                _retains(args, kw),
            )

        return backward


class AutogradBackward(Patch):
    name = "backward"

    def __init__(self, state: WatchState) -> None:
        super().__init__(state, torch.autograd)

    def wrap(self, original: Any) -> Any:
        state = self.state

        def backward(tensors: Any, grad_tensors: Any = None, *args: Any, **kw: Any) -> Any:
            here = enter(state)
            if here is None or here.depth:
                return original(tensors, grad_tensors, *args, **kw)
            roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
            roots = [t for t in roots if isinstance(t, torch.Tensor)]
            single = roots[0] if len(roots) == 1 else None
            return _counted(
                state,
                here,
                roots,
                single,
                grad_tensors,
                lambda: original(tensors, grad_tensors, *args, **kw),
                _retains(args, kw),
            )

        return backward


def _counted(
    state: WatchState,
    here: ThreadState,
    roots: list[torch.Tensor],
    tensor: torch.Tensor | None,
    gradient: Any,
    run: Any,
    retained: bool,
) -> Any:
    """Run the backward call between its start and its end."""
    safely(state, here, PART, lambda: backward_calls.started(state, here, roots, tensor, gradient))
    here.depth += 1
    try:
        out = run()
    except RuntimeError as exc:  # autograd's own errors: what graph failed (carried_graph.py)
        failure: BaseException = exc
        safely(state, here, PART, lambda: backward_calls.failed(state, here, roots, failure))
        raise
    finally:
        here.depth -= 1
    safely(state, here, PART, lambda: backward_calls.ended(state, here, roots, retained))
    return out


def _retains(args: tuple[Any, ...], kw: dict[str, Any]) -> bool:
    """The call keeps its graph: `retain_graph` (after the gradient, in both signatures),
    which defaults to `create_graph`."""
    retain = args[0] if args else kw.get("retain_graph")
    if retain is None:
        retain = args[1] if len(args) > 1 else kw.get("create_graph", False)
    return bool(retain)
