"""Which parameters of a DDP model got a gradient in a step, and if not, why.

DDP's own answer needs TORCH_DISTRIBUTED_DEBUG and names indices. Here, while
armed (the first steps and the step before each gathering), cheap hooks note:
which modules ran, whether a gradient reached each module's output, which
outputs a `.detach()` cut inside the forward, and how many times each
parameter's gradient was accumulated in one backward (twice: a reentrant
checkpoint). Disarmed, every hook returns at once.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.compiler import is_compiling

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

from gradscope.errors import user_line

NEVER_RAN = "never-ran"
CUT_INSIDE = "cut-inside"
DETACHED = "detached"
DROPPED = "output-dropped"


def ddp_parameters(
    model: nn.Module, ignore: frozenset[str] = frozenset()
) -> list[tuple[str, nn.Parameter]]:
    """(name, parameter) in DDP's own order, the order its error messages' indices count in:
    modules in `named_modules` order, each module's own trainable parameters, shared ones once."""
    seen: set[int] = set()
    out = []
    for mod_name, module in model.named_modules():
        for pname, p in module.named_parameters(recurse=False):
            full = f"{mod_name}.{pname}" if mod_name else pname
            if p.requires_grad and full not in ignore and id(p) not in seen:
                seen.add(id(p))
                out.append((full, p))
    return out


@dataclass(frozen=True)
class Unused:
    """A parameter without a gradient in one step, and the local reason."""

    name: str
    index: int
    """Its index in DDP's order (the number DDP's error prints)."""
    module: str
    cause: str
    where: str | None = None
    """`file:line` of the cut, when one was seen."""


class _DetachSpy(TorchFunctionMode):
    """Notes `.detach()` calls whose input is a watched module output."""

    def __init__(self, outputs: dict[int, str], cuts: dict[str, str | None]):
        super().__init__()
        self.outputs, self.cuts = outputs, cuts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("detach", "detach_") and args and id(args[0]) in self.outputs:
            with torch._C.DisableTorchFunction():
                self.cuts.setdefault(self.outputs[id(args[0])], user_line())
        return func(*args, **(kwargs or {}))


class UsageTracker:
    """Hooks on one DDP-wrapped model (the inner module); read after each backward."""

    def __init__(self, model: nn.Module, ignore: frozenset[str] = frozenset()):
        self.params = ddp_parameters(model, ignore)
        self.index = {id(p): i for i, (_, p) in enumerate(self.params)}
        owner: dict[int, str] = {}
        for mod_name, module in model.named_modules():
            for p in module.parameters(recurse=False):
                owner.setdefault(id(p), mod_name)
        self.owner = [owner.get(id(p), "") for _, p in self.params]
        self.armed = False
        self._spy: _DetachSpy | None = None
        self.reset()
        self.handles: list[Any] = []
        for mod_name, module in model.named_modules():
            self.handles.append(module.register_forward_hook(self._ran(mod_name)))
        for i, (_, p) in enumerate(self.params):
            self.handles.append(p.register_post_accumulate_grad_hook(self._arrived(i)))
            self.handles.append(p.register_hook(self._local(i)))

    def reset(self) -> None:
        self.ran: set[str] = set()
        self.reached: set[str] = set()
        self.outputs: dict[int, str] = {}
        self._keep: list[torch.Tensor] = []  # outputs stay alive so their ids stay unique
        self.cuts: dict[str, str | None] = {}
        self.arrivals = [0] * len(self.params)
        self._parts: list[tuple[int, torch.Tensor]] = []

    def _ran(self, name: str) -> Callable[..., None]:
        def hook(_m: nn.Module, _args: Any, out: Any) -> None:
            if is_compiling() or not self.armed:  # compiled: no guard, no break per module
                return
            self.ran.add(name)
            if isinstance(out, torch.Tensor) and out.requires_grad:
                self.outputs[id(out)] = name
                self._keep.append(out)
                out.register_hook(lambda g: self.reached.add(name))

        return hook

    def _arrived(self, i: int) -> Callable[[torch.Tensor], None]:
        def hook(_p: torch.Tensor) -> None:
            if self.armed:
                self.arrivals[i] += 1

        return hook

    def _local(self, i: int) -> Callable[[torch.Tensor], None]:
        """The gradient as this rank computed it, before DDP averages it across ranks."""

        def hook(grad: torch.Tensor) -> None:
            if self.armed:
                self._parts.append((i, grad.detach().double().pow(2).sum()))

        return hook

    def local_squares(self) -> torch.Tensor:
        """float64 squared local gradient norm per parameter (one host copy)."""
        out = torch.zeros(len(self.params), dtype=torch.float64)
        if self._parts:
            idx = torch.tensor([i for i, _ in self._parts])
            out.index_add_(0, idx, torch.stack([v for _, v in self._parts]).cpu())
        return out

    def forward_started(self) -> None:
        """Called before the DDP forward: a fresh record, and the detach spy on."""
        if self.armed:
            self.reset()
            self._spy = _DetachSpy(self.outputs, self.cuts)
            self._spy.__enter__()

    def forward_ended(self) -> None:
        self._keep = []
        if self._spy is not None:
            spy, self._spy = self._spy, None
            spy.__exit__(None, None, None)

    def unused(self) -> list[Unused]:
        """Parameters with no gradient in the last armed backward, with the local cause."""
        out = []
        for i, (name, _) in enumerate(self.params):
            if self.arrivals[i] > 0:
                continue
            mod = self.owner[i]
            out.append(Unused(name, i, mod, *self._cause(mod)))
        return out

    def _cause(self, mod: str) -> tuple[str, str | None]:
        if mod not in self.ran:
            return NEVER_RAN, None
        if mod in self.reached:
            return CUT_INSIDE, None
        if mod in self.cuts:
            return DETACHED, self.cuts[mod]
        if self.cuts:  # upstream of a cut elsewhere in the forward
            return DETACHED, next(iter(self.cuts.values()))
        return DROPPED, None

    def remove(self) -> None:
        self.forward_ended()
        for h in self.handles:
            h.remove()
        self.handles = []
