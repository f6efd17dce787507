"""One traced forward+backward: every module call's inputs and outputs, every gradient.

Each module call is recorded when its forward finishes (so a submodule comes before the
module that called it), with copies of its tensor inputs taken as it starts (a module
that writes its input in place, `ReLU(inplace=True)`, cannot change what was recorded)
and of its tensor outputs. A tensor seen again unchanged (the same object at the same
version: a block's input is its first norm's input) is copied once. The model is left
as it was found (`gradscope.inspector.preserve`), with its `.grad` tensors put back untouched.
"""

from __future__ import annotations

import inspect
import random
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.errors import short_path
from gradscope.fmt import printable
from gradscope.inspector import hooks
from gradscope.inspector.preserve import paused_guard, preserved_state
from gradscope.inspector.probe import backward_grads, gc_paused


@dataclass
class Call:
    name: str
    index: int
    """Which call of this module (0: the first)."""
    kind: str
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


@dataclass
class Trace:
    calls: list[Call]
    """In the order the forwards finished."""
    grads: dict[str, torch.Tensor | None]
    """Parameter name → its gradient from this pass (None: it got none)."""
    loss: torch.Tensor
    loss_source: str
    by_key: dict[tuple[str, int], Call] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_key = {(c.name, c.index): c for c in self.calls}


class _Copies:
    """Detached copies of the tensors a pass passes around, each (object, version) once."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def of(self, value: Any) -> list[torch.Tensor]:
        out = []
        for t in hooks.tensors_in(value):
            key = (id(t), t._version)
            kept = self.seen.get(key)
            if kept is None or kept[0] is not t:
                kept = (t, t.detach().clone())
                self.seen[key] = kept
            out.append(kept[1])
        return out


def seeded(seed: int) -> None:
    """The same random state before each pass: torch (every device), `random`, numpy."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


@contextmanager
def _recording(model: torch.nn.Module, calls: list[Call]) -> Iterator[None]:
    copies = _Copies()
    pending: dict[int, list[list[torch.Tensor]]] = {}
    counts: dict[str, int] = {}
    handles = []
    for name, module in model.named_modules():

        def enter(m: Any, args: Any, kwargs: Any) -> None:
            with torch.no_grad(), paused_guard():
                pending.setdefault(id(m), []).append(copies.of((args, kwargs)))

        def leave(m: Any, _args: Any, _kwargs: Any, out: Any, name: str = name) -> None:
            with torch.no_grad(), paused_guard():
                stack = pending.get(id(m)) or [[]]
                inputs = stack.pop()
                index = counts.get(name, 0)
                counts[name] = index + 1
                calls.append(Call(name, index, type(m).__name__, inputs, copies.of(out)))

        handles.append(module.register_forward_pre_hook(enter, with_kwargs=True))
        handles.append(module.register_forward_hook(leave, with_kwargs=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def trace(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None,
    seed: int,
    setting: Callable[[], AbstractContextManager[Any]] | None = None,
    backward: bool = True,
) -> Trace:
    """Seed, forward with every module recorded, loss, backward; the model left as found.

    `setting`: a context the forward runs in (autocast for `--b-autocast`)."""
    calls: list[Call] = []
    with gc_paused(), preserved_state(model), torch.enable_grad():
        seeded(seed)
        with _recording(model, calls), (setting or nullcontext)():
            output = hooks.forward(model, batch)
            loss, source = hooks.pick_loss(output, loss_fn)
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        grads: list[torch.Tensor | None] = [None] * len(named)
        if backward and loss.requires_grad and named:
            nodes = hooks.graph_nodes(loss)
            grads = backward_grads(loss, None, [p for _, p in named], nodes)
        with paused_guard():
            return Trace(
                calls,
                {n: g for (n, _), g in zip(named, grads, strict=True)},
                loss.detach().clone(),
                source,
            )


def where(module: torch.nn.Module) -> str:
    """`path/file.py:LINE` of the module class's forward ("" when it cannot be found)."""
    cls = type(module)
    found = _WHERE.get(cls)
    if found is None:
        found = _WHERE[cls] = _where(cls)
    return found


_WHERE: dict[type, str] = {}
"""Class → location, found once per class: reading a source file's lines costs ~1 ms, a
model has thousands of module calls and a few dozen classes."""


def _where(cls: type) -> str:
    forward = getattr(cls, "forward", None)
    for obj in (inspect.unwrap(forward) if callable(forward) else None, cls):
        try:
            path = inspect.getsourcefile(obj)  # type: ignore[arg-type]
            _, line = inspect.getsourcelines(obj)  # type: ignore[arg-type]
        except (TypeError, OSError):
            continue
        if path:
            return f"{_readable(path)}:{line}"
    return ""


def _readable(path: str) -> str:
    """Relative to the working directory, or from the installed package's folder on."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.rpartition(marker)[2]
    return short_path(path)


def assigned(model: torch.nn.Module, name: str) -> str:
    """Where the module `name` is created: `file.py:LINE: self.ln_1 = nn.LayerNorm(...)` in
    its parent's `__init__` (a ModuleList's items: the list's line). "" if not found."""
    parts = name.split(".")
    while parts and parts[-1].isdigit():
        parts.pop()
    if not parts:
        return ""
    attr, parent_name = parts[-1], ".".join(parts[:-1])
    try:
        parent = model.get_submodule(parent_name)
        init = inspect.unwrap(type(parent).__init__)
        path = inspect.getsourcefile(init)
        lines, first = inspect.getsourcelines(init)
    except (AttributeError, TypeError, OSError):
        return ""
    pattern = re.compile(rf"\bself\.{re.escape(attr)}\s*(:[^=]*)?=[^=]")
    for offset, line in enumerate(lines):
        if pattern.search(line) and path:
            code = printable(line.strip())
            code = code if len(code) <= 72 else code[:71] + "…"  # its start says what it makes
            return f"{_readable(path)}:{first + offset}: {code}"
    return ""
