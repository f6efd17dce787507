"""The modules that hold a parameter without a gradient at an optimizer's first step,
watched for the grad mode of their forwards. A module the script runs only inside
`torch.no_grad()` is frozen by that block (fairseq's feature encoder under
feature_grad_mult=0, an encoder held for its first freeze_finetune_updates): its
parameters get no gradient by design, not because the graph was cut by mistake.

One forward pre-hook per such module, registered once at the optimizer's first step
(a walk of the models' modules then, none later): each forward costs a grad-mode read
and a set insert. The hooks are registered through EvalPasses, which removes them with
the watch and keeps them out of a model the script pickles or copies.

Grad mode is off inside a custom autograd.Function's forward too: torch.utils.checkpoint's
reentrant CheckpointFunction, a reversible block's. Such a forward is not a block that
freezes: it is told apart (the frames above the module, walked at its first forward
without gradients only) and named by its Function."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

import torch
from torch import nn

from gradscope.hookable import hookable
from gradscope.watcher.number_reads import read_as_number


class NoGradOwners:
    def __init__(self) -> None:
        self.chains: dict[int, tuple[int, ...]] = {}
        """Tracked position → ids of the module holding it and of its ancestors, innermost
        first: a parameter its module reads without calling the module's forward (attention's
        out_proj) is judged by the innermost module whose forward ran."""
        self.hooked: set[int] = set()
        self.failed = False
        self.with_grad: set[int] = set()
        """Ids of the modules that ran a forward with grad mode on."""
        self.without: set[int] = set()
        """Ids of the modules that ran a forward with grad mode off."""
        self.outside_backward: set[int] = set()
        """Ids of the modules that ran a forward with grad mode on outside every backward:
        the others of with_grad ran one only inside a backward (a custom Function's)."""
        self.in_function: dict[int, str] = {}
        """Ids of the modules whose forward ran with grad mode off inside a custom
        autograd.Function's forward → that Function, by module and name."""
        self.library: dict[int, str] = {}
        """Ids of the hooked modules whose class an installed package defines (not torch's
        own) → that class, by module and name."""
        self.own: set[int] = set()
        """Ids of the hooked modules whose class is neither torch's nor an installed
        package's: the script's own."""
        self.holders: dict[int, tuple[type, str]] = {}
        """Tracked position → the installed library's class holding it and its name there."""

    def watch(
        self,
        roots: Iterable[nn.Module],
        index: dict[int, int],
        register: Callable[[nn.Module, Callable[..., None]], None],
    ) -> None:
        """Hook the modules of `roots` holding a parameter that requires grad and has no
        .grad now (`index`: id(param) → tracked position), and their ancestors; a module
        hooked before is not hooked again."""
        for root in roots:
            parents = {id(c): m for m in root.modules() for c in m.children()}
            for module in root.modules():
                for key, p in module._parameters.items():
                    if p is None or not p.requires_grad or p.grad is not None:
                        continue
                    if id(p) in index and index[id(p)] not in self.chains:
                        if library_class(type(module)) is not None:
                            self.holders[index[id(p)]] = (type(module), key)
                        chain = _ancestors(module, parents)
                        self.chains[index[id(p)]] = tuple(id(m) for m in chain)
                        for m in chain:
                            self._hook(m, register)

    def _hook(self, module: nn.Module, register: Callable[..., None]) -> None:
        if id(module) not in self.hooked and hookable(module):
            self.hooked.add(id(module))
            register(module, self._forward)
            if (name := library_class(type(module))) is not None:
                self.library[id(module)] = name
            elif type(module).__module__.split(".")[0] != "torch":
                self.own.add(id(module))

    def _forward(self, module: nn.Module, _args: Any) -> None:
        """A hooked module's forward: never raises into the script's forward; a failure of
        its own forgets what it held, so that no fact is claimed from half a record."""
        if torch.jit.is_tracing() or self.failed:
            return
        try:
            self._record(module)
        except Exception:
            self.failed = True
            self.chains.clear()
            self.holders.clear()

    def _record(self, module: nn.Module) -> None:
        if torch.is_grad_enabled():
            self.with_grad.add(id(module))
            if torch._C._current_graph_task_id() == -1:
                self.outside_backward.add(id(module))
        elif id(module) not in self.without and id(module) not in self.in_function:
            function = _applying()
            if function is None:
                self.without.add(id(module))
            else:
                self.in_function[id(module)] = function

    def function_around(self, position: int) -> str:
        """The custom autograd.Function inside whose forward the innermost module holding
        it that ran a forward ran every one of them ("": any other)."""
        for module in self.chains.get(position, ()):
            if module in self.with_grad or module in self.without:
                return ""
            if module in self.in_function:
                return self.in_function[module]
        return ""

    def rerun_by(self, position: int) -> str:
        """The custom autograd.Function inside whose forward the innermost module holding it
        that ran a forward first ran, grad mode off, and which ran it again with gradients on
        only inside a backward (torchdiffeq's adjoint: the ODE's func in the adjoint solve);
        "": any other."""
        for module in self.chains.get(position, ()):
            if module in self.without or module in self.outside_backward:
                return ""
            if module in self.in_function and module in self.with_grad:
                return self.in_function[module]
        return ""

    def only_without(self, position: int) -> bool:
        """The innermost module holding it whose forward ran since its optimizer's first
        step ran every forward with grad mode off, not inside a Function's forward."""
        for module in self.chains.get(position, ()):
            if module in self.with_grad or module in self.in_function:
                return False
            if module in self.without:
                return True
        return False

    def uncalled_in(self, position: int) -> str:
        """The installed library's class whose forward ran with gradients and never called
        the module holding it (nor the modules between them): a submodule the library builds
        and its configuration leaves out (MONAI's TransformerBlock builds norm_cross_attn
        whatever with_cross_attention says). "": any other, the user's own forward included,
        where a layer defined and never called is a mistake to name."""
        chain = self.chains.get(position, ())
        for k, module in enumerate(chain):
            if module in self.with_grad or module in self.without or module in self.in_function:
                return self.library.get(module, "") if k > 0 and module in self.with_grad else ""
        return ""

    def read_as_number_in(self, position: int) -> str:
        """The installed library's class holding it whose source reads it only as a Python
        number (number_reads.py): a setting stored as a parameter; "": none."""
        if position not in self.holders:
            return ""
        cls, name = self.holders[position]
        return f"{library_class(cls)}" if read_as_number(cls, name) else ""


def library_class(cls: type) -> str | None:
    """`package.module.Class` of a class an installed package defines, torch's excepted:
    torch's layers read a child's parameters without calling it (attention's out_proj)."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None) or ""
    if cls.__module__.split(".")[0] == "torch" or not any(
        marker in path for marker in ("site-packages", "dist-packages")
    ):
        return None
    return f"{cls.__module__}.{cls.__qualname__}"


_APPLY = torch.autograd.Function.apply.__func__.__code__  # type: ignore[attr-defined]
FRAMES = 48
"""Frames walked up from a module's forward pre-hook to a Function's apply."""


def _applying() -> str | None:
    """The autograd.Function whose `apply` is on the stack above this hook, if any."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(FRAMES):
        if frame is None:
            return None
        if frame.f_code is _APPLY:
            cls = frame.f_locals.get("cls")
            return f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else None
        frame = frame.f_back
    return None


def _ancestors(module: nn.Module, parents: dict[int, nn.Module]) -> list[nn.Module]:
    chain = [module]
    while id(chain[-1]) in parents and len(chain) <= len(parents):
        chain.append(parents[id(chain[-1])])
    return chain
