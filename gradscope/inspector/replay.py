"""The forward and the loss replayed once more under a `TorchFunctionMode` that watches
every torch call, naming the op, the module and the user's line: what the explanation
passes (explain, explain_cuts) and the live watch of a script (script_live) read."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

from gradscope.errors import calling_user_frame, short_path, user_line
from gradscope.inspector import hooks, preserve
from gradscope.inspector.uninitialised import without_out

_CHECKPOINT = os.path.join("torch", "utils", "checkpoint.py")


MAX_SITES = 3


def in_reentrant_checkpoint() -> str | None:
    """The user's line that called a torch.utils.checkpoint now running its forward, if any."""
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_CHECKPOINT):
            caller = calling_user_frame(frame)
            return f"{short_path(caller.f_code.co_filename)}:{caller.f_lineno}" if caller else ""
        frame = frame.f_back
    return None


def op_name(func: Any) -> str:
    """A torch function's short name; `data` for the Tensor.data property."""
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a property such as Tensor.data
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", "attribute")
    return name


def flat_tensors(value: Any) -> list[torch.Tensor]:
    return list(hooks.tensors_in(value))


@contextmanager
def module_stack(model: torch.nn.Module) -> Iterator[list[str]]:
    """The names of the modules currently inside their forward, innermost last."""
    stack: list[str] = []

    def leave(_name: str, _m: Any, _out: Any) -> None:
        if stack:
            stack.pop()

    with hooks.module_hooks(model, pre=lambda name, _m: stack.append(name), post=leave):
        yield stack


Observe = Callable[[str, list[torch.Tensor], Any, str], None]
CALL: ContextVar[tuple[Any, Any]] = ContextVar("replayed_call", default=((), {}))
"""The (args, kwargs) of the call being observed: its non-tensor arguments (a fill value)."""


class OpObserver(TorchFunctionMode):
    """Calls `observe(name, inputs, output, module)` after every torch function."""

    def __init__(self, observe: Observe, stack: list[str]):
        super().__init__()
        self.observe = observe
        self.stack = stack

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = flat_tensors((args, without_out(kwargs or {})))  # what it read
        token = CALL.set((args, kwargs or {}))
        try:
            with torch._C.DisableTorchFunction():
                self.observe(op_name(func), inputs, out, self.stack[-1] if self.stack else "")
        finally:
            CALL.reset(token)
        return out


def replay(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Any,
    grad_outputs: Any,
    observe: Observe,
    post: hooks.PostHook | None = None,
) -> torch.Tensor:
    """The forward and the loss once more, with `observe` watching every torch call; the loss."""
    with (
        preserve.preserved_state(model),
        module_stack(model) as stack,
        hooks.module_hooks(model, post=post),
        torch.enable_grad(),
        OpObserver(observe, stack),
    ):
        target, _ = hooks.forward_and_loss(model, batch, loss_fn, grad_outputs)
    return target


def op_sites(model, batch, loss_fn, grad_outputs, test) -> list[str]:
    """Distinct `op at file:line in module` strings where `test(name, inputs, out)` holds."""
    seen: dict[str, None] = {}

    def observe(name: str, inputs: list[torch.Tensor], out: Any, module: str) -> None:
        if len(seen) < MAX_SITES and test(name, inputs, out):
            seen.setdefault(site(name, module), None)

    replay(model, batch, loss_fn, grad_outputs, observe)
    return list(seen)


def site(name: str, module: str, line: str | None = None) -> str:
    line = line if line is not None else user_line()
    return f"`{name}`" + (f" at {line}" if line else "") + (f" in `{module}`" if module else "")


SHAPE_ONLY = frozenset(
    ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
     "randint_like", "new_zeros", "new_ones", "new_empty", "new_full")
)  # fmt: skip
"""Ops that read only their input's shape, dtype and device: no value of it goes on: no
cut, though their output never requires grad (the Gumbel noise of
`-torch.empty_like(logits).exponential_().log()`, a dropout mask from `rand_like`)."""

CUT_KINDS = {
    "detach": ".detach()",
    "detach_": ".detach_()",
    "data": ".data",
    "item": ".item() (a Python number)",
    "tolist": ".tolist() (Python numbers)",
    "numpy": ".numpy() (a NumPy round-trip)",
    "__float__": "float() (a Python number)",
    "__int__": "int() (a Python number)",
    "requires_grad_": "requires_grad_(False)",
}
