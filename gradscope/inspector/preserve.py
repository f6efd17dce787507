"""Leaving the model exactly as inspect found it: parameters, buffers, flags, mode, RNGs.

A small model's parameters are copied whole up front; a larger model's are copied
just before their first in-place write (`_WriteGuard`, a TorchFunctionMode: a few µs
per torch call of the user's code, none of gradscope's own, see `paused_guard`),
because a `_version` counter would only say afterwards *that* one was written, with
nothing left to restore it from.
"""

from __future__ import annotations

import random
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import _get_current_function_mode, _pop_mode_temporarily

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

from gradscope.distributed.norms import local
from gradscope.errors import GradscopeError

__all__ = ["COPIED_UP_TO", "paused_guard", "preserved_state", "storage_of"]


_INPLACE_DUNDERS = {
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__ipow__",
    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__setitem__",
}  # fmt: skip
_WRITES: dict[Any, bool] = {}
"""torch function → whether it writes its first argument in place (decided once per function)."""


class _Kept:
    """Parameter and buffer values copied before they could be written, put back after.

    Each is held through `t.data` taken up front: putting it back writes the storage the
    tensor had (also if the forward rebinds `t.data`) and leaves `t._version` as the
    user's own code left it."""

    def __init__(self) -> None:
        self.copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def keep(self, alias: torch.Tensor) -> None:
        if id(alias) not in self.copies:
            self.copies[id(alias)] = (alias, alias.clone())

    def restore(self) -> None:
        if self.copies:
            targets, saved = zip(*self.copies.values(), strict=True)
            with torch.no_grad():
                torch._foreach_copy_(list(targets), list(saved))


COPIED_UP_TO = 4 << 20
"""Parameters of up to this many bytes in all are copied whole before the pass (≈ 0.4 ms
for a 0.7M-parameter CNN, less than guarding the ~90 torch calls of its forward); a
larger model gets the `_WriteGuard`, which copies only what is written."""


def _copy_up_front(aliases: Sequence[torch.Tensor]) -> bool:
    return sum(a.numel() * a.element_size() for a in aliases) <= COPIED_UP_TO and all(
        type(a) is torch.Tensor and a.layout == torch.strided and a.is_contiguous() for a in aliases
    )


class _WriteGuard(TorchFunctionMode):
    """Copies a parameter just before the first in-place write to it.

    (Buffers are small and copied whole up front: BatchNorm updates its running
    statistics inside its kernel, where no torch function is seen; so are the parameters
    of a small model, see COPIED_UP_TO.) Copying every parameter up front would cost a
    full pass over the model's memory on every inspect (≈ 0.5 GB for GPT-2); writes in
    forward are rare, so only the tensors actually written are copied, and put back at
    the end.

    The price is one Python call per torch function the user's forward, loss
    and backward make (≈ 2-15 µs each on a CPU: ~0.5 ms on the 14M GPT's 127
    calls, ~0.1% of its pass); gradscope's own tensor code runs with the guard
    paused (`paused_guard`). Parameter `_version` counters would be cheaper
    still but only say *that* a tensor was written, after the fact: without a
    copy taken before the first write, the value could not be put back
    bit-exactly, also when the forward raises half-way, and a write through
    `.data` does not count.
    """

    def __init__(self, aliases: Sequence[torch.Tensor], kept: _Kept):
        super().__init__()
        self.by_storage: dict[int, list[torch.Tensor]] = {}
        for a in aliases:
            where = storage_of(a)
            if where is not None:
                self.by_storage.setdefault(where, []).append(a)
        self.kept = kept

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        writes = _WRITES.get(func)
        if writes is None:
            name = getattr(func, "__name__", "")
            writes = (name.endswith("_") and not name.endswith("__")) or name in _INPLACE_DUNDERS
            _WRITES[func] = writes
        if writes:
            self._save(args[0] if args else None)
        if "out" in kwargs:
            self._save(kwargs["out"])
        return func(*args, **kwargs)

    def _save(self, target: Any) -> None:
        with torch._C.DisableTorchFunction():
            for t in target if isinstance(target, (list, tuple)) else (target,):
                if isinstance(t, torch.Tensor):
                    for alias in self.by_storage.get(storage_of(t) or -1, ()):
                        self.kept.keep(alias)


@contextmanager
def paused_guard() -> Iterator[None]:
    """Run gradscope's own tensor code without the write guard's per-call cost."""

    if isinstance(_get_current_function_mode(), _WriteGuard):
        with _pop_mode_temporarily():
            yield
    else:
        yield


@dataclass
class _Snapshot:
    """What inspect must give back: references to put back, and the values in `kept`."""

    buffers: list[tuple[torch.nn.Module, str, torch.Tensor]]
    params: list[tuple[torch.nn.Module, str, torch.nn.Parameter, torch.Tensor, bool]]
    lazy: list[tuple[torch.nn.Module, str, torch.nn.Parameter]]
    """A lazy module's parameters before their first call: the forward materialises them
    (as the model's own first call would, from gradscope's forked RNG) and they stay so."""
    modes: list[tuple[torch.nn.Module, bool]]
    py_random: Any
    np_random: Any
    kept: _Kept
    held: list[tuple[dict[Any, Any], dict[Any, Any]]]
    """Parameters' post-accumulate-grad hooks (a dict each) and their entries, set aside."""


def _snapshot(model: torch.nn.Module) -> _Snapshot:
    """One walk over the modules; buffers' values are copied (BatchNorm writes its running
    statistics inside its kernel, where no torch function is seen)."""
    buffers, params, modes, lazy, kept = [], [], [], [], _Kept()
    for prefix, m in model.named_modules():
        modes.append((m, m.training))
        for name, b in m._buffers.items():
            if b is not None:
                buffers.append((m, name, b))
                if not _uninitialized(b):  # a lazy module's: the forward materialises it
                    kept.keep(b.data)
        for name, p in m._parameters.items():
            if p is not None:
                if _uninitialized(p):
                    lazy.append((m, name, p))
                    continue
                if p.is_meta:
                    raise GradscopeError(
                        f"parameter {prefix}{'.' if prefix else ''}{name} is on the meta device "
                        "(it has no data): materialise the model (to_empty() and initialise "
                        "it, or load its weights) before inspecting"
                    )
                params.append((m, name, p, p.detach(), p.requires_grad))
    numpy = sys.modules.get("numpy")
    held = _hold_post_accumulate_hooks(p[2] for p in params)
    return _Snapshot(
        buffers,
        params,
        lazy,
        modes,
        random.getstate(),
        numpy.random.get_state() if numpy is not None else None,
        kept,
        held,
    )


def _hold_post_accumulate_hooks(
    params: Iterable[torch.Tensor],
) -> list[tuple[dict[Any, Any], dict[Any, Any]]]:
    """Empty the parameters' post-accumulate-grad hooks for the pass, keeping their entries.

    Such a hook consumes a finished gradient (an optimizer stepped inside backward, then
    `zero_grad`): run by the pass, it would step the user's optimizer and leave the pass no
    gradient to measure. The dict is emptied, not replaced: torch holds that very object,
    and the user's handles remove from it."""
    held = {}
    for p in params:
        hooks = p._post_accumulate_grad_hooks
        if hooks and id(hooks) not in held:
            held[id(hooks)] = (hooks, dict(hooks))
    for hooks, _ in held.values():
        hooks.clear()
    return list(held.values())


def _restore(snap: _Snapshot) -> None:
    snap.kept.restore()
    with torch.no_grad():
        for m, name, b in snap.buffers:
            if _entry(m._buffers, name) is not b:
                m._buffers[name] = b  # undoes `self.steps = self.steps + 1` in forward
        for m, name, p, data, flag in snap.params:
            if _entry(m._parameters, name) is not p:
                m._parameters[name] = p
            p.data = data  # undoes `self.w.data = ...`, a view of its own storage too
            if p.requires_grad is not flag:
                p.requires_grad_(flag)
    for m, name, p in snap.lazy:
        if _entry(m._parameters, name) is not p:
            m._parameters[name] = p
    for m, training in snap.modes:
        if m.training is not training:  # Module.__setattr__ is slow; most modes never change
            m.training = training
    for hooks, entries in snap.held:
        hooks.clear()
        hooks.update(entries)
    random.setstate(snap.py_random)
    numpy = sys.modules.get("numpy")
    if snap.np_random is not None and numpy is not None:
        numpy.random.set_state(snap.np_random)


def _entry(table: Any, name: str) -> Any:
    """`table[name]` or None: a TorchScript module's tables (OrderedDictWrapper) have no
    `get`."""
    return table[name] if name in table else None


@contextmanager
def preserved_state(model: torch.nn.Module) -> Iterator[None]:
    """Leave parameters, buffers, flags, mode and the three RNGs (torch, `random`,
    `numpy.random`) exactly as they were, also when the user's code raises."""
    snap = _snapshot(model)
    aliases = list({id(p[2]): p[2].data for p in snap.params}.values())
    guard: AbstractContextManager[Any] = nullcontext()
    if _copy_up_front(aliases):
        for a in aliases:
            snap.kept.keep(a)
    else:
        guard = _WriteGuard(aliases, snap.kept)
    devices = sorted(
        {t.device.index or 0 for t in aliases + [b[2] for b in snap.buffers] if t.is_cuda}
    )
    try:
        with torch.random.fork_rng(devices=devices), guard:
            yield
    finally:
        _restore(snap)


def _uninitialized(t: torch.Tensor) -> bool:
    """A lazy module's parameter or buffer before its first call (no shape, no data yet)."""
    return bool(torch.nn.parameter.is_lazy(t))


def storage_of(t: torch.Tensor) -> int | None:
    """Where `t`'s memory starts (a DTensor's: its local shard's); None where it has none."""
    t = local(t)
    if t.layout != torch.strided or t.is_meta:
        return None
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:  # a tensor subclass that holds no storage of its own
        return None
