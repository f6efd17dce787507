"""One instrumented forward+backward pass → RunStats.

Gradients are computed the way training computes them, with `backward()`
(so every activation-checkpointing mode works, reentrant included): the
user's `.grad` tensors are set aside first and put back, the very same
objects, afterwards. Forward hooks only record which modules ran and in what
order; all statistics come from fused foreach reductions read back with a
single host sync.
"""

from __future__ import annotations

import math
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

with warnings.catch_warnings():  # torch warns here when numpy is not installed
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from torch.overrides import TorchFunctionMode

from gradscope import hooks
from gradscope.errors import GradscopeError, UserCodeError
from gradscope.hooks import backward_target, call_model, pick_loss
from gradscope.stats import ModuleStats, ParamStats, RunStats

__all__ = [
    "backward_target",
    "call_model",
    "measure",
    "module_order",
    "pick_loss",
    "preserved_state",
    "retained_graphs",
    "run",
    "saved_tensor_sizes",
]


@contextmanager
def module_order(model: torch.nn.Module) -> Iterator[dict[str, int]]:
    """Record the order in which modules are first entered, then remove the hooks."""
    order: dict[str, int] = {}

    def enter(name: str, _m: torch.nn.Module) -> None:
        order.setdefault(name, len(order))

    with hooks.module_hooks(model, pre=enter):
        yield order


# --- leaving the model as it was found ----------------------------------------------------------

_INPLACE_DUNDERS = {
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__ipow__",
    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__setitem__",
}  # fmt: skip


class _WriteGuard(TorchFunctionMode):
    """Copies a parameter or buffer just before the first in-place write to it.

    Copying every parameter up front would cost a full pass over the model's
    memory on every inspect (≈ 0.5 GB for GPT-2); writes in forward are rare,
    so only the tensors actually written are copied, and put back at the end.
    """

    def __init__(self, tensors: list[torch.Tensor]):
        super().__init__()
        self.by_storage: dict[int, list[torch.Tensor]] = {}
        for t in tensors:
            if t.device.type != "meta" and not t.is_sparse:
                self.by_storage.setdefault(t.untyped_storage().data_ptr(), []).append(t)
        self.copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (name.endswith("_") and not name.endswith("__")) or name in _INPLACE_DUNDERS:
            self._save(args[0] if args else None)
        if "out" in kwargs:
            self._save(kwargs["out"])
        return func(*args, **kwargs)

    def _save(self, target: Any) -> None:
        with torch._C.DisableTorchFunction():
            for t in target if isinstance(target, (list, tuple)) else (target,):
                if not isinstance(t, torch.Tensor) or t.is_sparse or t.device.type == "meta":
                    continue
                for owner in self.by_storage.get(t.untyped_storage().data_ptr(), ()):
                    if id(owner) not in self.copies:
                        self.copies[id(owner)] = (owner, owner.detach().clone())

    def restore(self) -> None:
        with torch.no_grad():
            for owner, saved in self.copies.values():
                owner.copy_(saved)


@dataclass
class _Snapshot:
    """What inspect must give back: cheap references, values copied only where needed."""

    buffers: list[tuple[torch.nn.Module, str, torch.Tensor, torch.Tensor]]
    params: list[tuple[torch.nn.Module, str, torch.nn.Parameter, torch.Tensor, bool]]
    modes: list[tuple[torch.nn.Module, bool]]
    py_random: Any
    np_random: Any


def _snapshot(model: torch.nn.Module) -> _Snapshot:
    buffers = []
    params = []
    for m in model.modules():
        for name, b in m._buffers.items():
            if b is not None:
                buffers.append((m, name, b, b.detach().clone()))
        for name, p in m._parameters.items():
            if p is not None:
                params.append((m, name, p, p.detach(), p.requires_grad))
    numpy = sys.modules.get("numpy")
    return _Snapshot(
        buffers,
        params,
        [(m, m.training) for m in model.modules()],
        random.getstate(),
        numpy.random.get_state() if numpy is not None else None,
    )


def _restore(snap: _Snapshot) -> None:
    with torch.no_grad():
        for m, name, b, saved in snap.buffers:
            m._buffers[name] = b  # undoes `self.steps = self.steps + 1` in forward
            b.copy_(saved)
        for m, name, p, data, flag in snap.params:
            m._parameters[name] = p
            if p.data.untyped_storage().data_ptr() != data.untyped_storage().data_ptr():
                p.data = data  # undoes `self.w.data = ...`
            p.requires_grad_(flag)
    for m, training in snap.modes:
        m.training = training
    random.setstate(snap.py_random)
    numpy = sys.modules.get("numpy")
    if snap.np_random is not None and numpy is not None:
        numpy.random.set_state(snap.np_random)


@contextmanager
def preserved_state(model: torch.nn.Module) -> Iterator[None]:
    """Leave parameters, buffers, flags, mode and the three RNGs (torch, `random`,
    `numpy.random`) exactly as they were, also when the user's code raises."""
    for name, p in model.named_parameters():
        if p.device.type == "meta":
            raise GradscopeError(
                f"parameter {name} is on the meta device (it has no data): materialise the "
                "model (to_empty() and initialise it, or load its weights) before inspecting"
            )
    snap = _snapshot(model)
    tensors = [p[2] for p in snap.params] + [b[2] for b in snap.buffers]
    guard = _WriteGuard(tensors)
    devices = sorted({t.device.index or 0 for t in tensors if t.is_cuda})
    try:
        with torch.random.fork_rng(devices=devices), guard:
            yield
    finally:
        guard.restore()
        _restore(snap)


# --- the pass --------------------------------------------------------------------------------


def run(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    grad_outputs: torch.Tensor | None = None,
) -> RunStats:
    """Forward, backward and statistics, with the model left as it was found."""
    saved: dict[tuple[int, int], int] = {}
    with (
        preserved_state(model),
        module_order(model) as order,
        torch.enable_grad(),
        hooks.loss_scales() as scales,
    ):
        start = time.perf_counter()
        with saved_tensor_sizes(saved):
            output = hooks.forward(model, batch)
        target, source = backward_target(output, loss_fn, grad_outputs)
        return measure(model, target, grad_outputs, source, order, start, saved, scales.get(target))


def measure(
    model: torch.nn.Module,
    target: torch.Tensor,
    grad_outputs: torch.Tensor | None,
    source: str,
    order: dict[str, int],
    start: float,
    saved: dict[tuple[int, int], int],
    scale: hooks.LossScale | None = None,
) -> RunStats:
    """Backward from `target` (already computed by a forward) and the fused statistics.

    `scale`: `target` is a GradScaler-scaled loss; loss and gradients are
    reported divided by it.
    """
    named = list(model.named_parameters())
    trainable = [p for _, p in named if p.requires_grad]
    grads: list[torch.Tensor | None] = [None] * len(trainable)
    if target.requires_grad and trainable:
        grads = _backward(target, grad_outputs, trainable)
    loss = scale.loss if scale is not None else target
    factor = 1.0 / scale.value if scale is not None else 1.0
    with torch.no_grad():
        numbers = _fused_stats(loss, [p for _, p in named], grads)
    duration = time.perf_counter() - start
    stats = _assemble(
        model,
        named,
        grads,
        numbers,
        order,
        target,
        source,
        duration,
        grad_outputs is not None,
        factor,
    )
    if scale is not None:
        stats = replace(
            stats,
            loss_source=f"{source}, unscaled: a GradScaler loss scale of {scale.value:g} was "
            "removed from the loss and every gradient",
            loss_scale=scale.value,
        )
    return replace(stats, saved_bytes=sum(saved.values()), retained=retained_graphs(model))


def _backward(
    target: torch.Tensor, grad_outputs: torch.Tensor | None, params: Sequence[torch.Tensor]
) -> list[torch.Tensor | None]:
    """`target.backward()` as training runs it, with every leaf's `.grad` set aside and restored.

    `backward()` rather than `autograd.grad(target, params)`: a reentrant
    checkpoint refuses `.grad()`. The leaves it accumulates into are the
    parameters plus any leaf of the loss's graph (an input that requires grad);
    their `.grad` tensors are put back, the same objects, untouched.
    """
    leaves = {id(p): p for p in params}
    for node in hooks.graph_nodes(target):
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.setdefault(id(variable), variable)
    aside = [(t, t.grad) for t in leaves.values()]
    for t, _ in aside:
        t.grad = None
    try:
        target.backward(grad_outputs)
        return [p.grad for p in params]
    except Exception as exc:
        raise UserCodeError("backward pass", exc) from exc
    finally:
        for t, grad in aside:
            t.grad = grad


@contextmanager
def saved_tensor_sizes(sizes: dict[tuple[int, int], int]) -> Iterator[None]:
    """Bytes the forward saves for backward, each storage once (the activation memory)."""

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.layout == torch.strided and t.device.type != "meta":
            sizes[(t.untyped_storage().data_ptr(), int(t.storage_offset()))] = (
                t.numel() * t.element_size()
            )
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield


def retained_graphs(model: torch.nn.Module) -> tuple[str, ...]:
    """Module attributes that still hold a tensor with a grad_fn after the pass.

    Such a reference keeps the whole autograd graph of the step alive (the
    classic slow out-of-memory: `self.last = out`, `self.losses.append(loss)`).
    """
    found = []
    for name, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr.startswith("_"):
                continue
            values = (
                value
                if isinstance(value, (list, tuple))
                else (value.values() if isinstance(value, dict) else (value,))
            )
            if any(isinstance(v, torch.Tensor) and v.grad_fn is not None for v in values):
                found.append(f"{name}.{attr}" if name else attr)
    return tuple(found)


# --- the statistics ------------------------------------------------------------------------------


def _dense(g: torch.Tensor) -> torch.Tensor:
    """What the statistics read: the values of a sparse gradient, |g| of a complex one."""
    if g.is_sparse:
        g = g.coalesce().values()
    if g.is_complex():
        g = g.abs()
    return g if g.numel() else g.new_zeros(1)


def _norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """L2 norms by one fused op; half precision is accumulated in float32 so it cannot overflow."""
    low = any(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)
    return torch.stack(torch._foreach_norm(tensors, 2, dtype=torch.float32 if low else None))


def _fused_stats(
    loss: torch.Tensor, params: list[torch.Tensor], grads: list[torch.Tensor | None]
) -> list[float]:
    """[loss, loss_finite, weight norms..., per present grad: l2, max|g|, nonzeros] in one sync.

    max|g| comes from an inf-norm, which propagates NaN, so it doubles as the
    non-finite test (an L2 norm can overflow without any Inf).
    """
    f64 = torch.float64
    present = [_dense(g) for g in grads if g is not None]
    loss = loss.detach()
    parts = [
        loss.reshape(-1)[:1].real.to(f64)
        if loss.numel() == 1
        else torch.full((1,), math.nan, dtype=f64, device=loss.device),
        torch.isfinite(loss).all().reshape(1).to(f64),
    ]
    if params:
        parts.append(_norms([_dense(p.detach()) for p in params]).to(f64))
    if present:
        parts.append(_norms(present).to(f64))
        parts.append(torch.stack(torch._foreach_norm(present, math.inf)).to(f64))
        parts.append(torch.stack([g.count_nonzero() for g in present]).to(f64))
    device = loss.device
    return torch.cat([p.to(device) for p in parts]).tolist()


def _assemble(
    model: torch.nn.Module,
    named: Sequence[tuple[str, torch.Tensor]],
    grads: list[torch.Tensor | None],
    numbers: list[float],
    order: dict[str, int],
    target: torch.Tensor,
    source: str,
    duration: float,
    weighted: bool,
    factor: float = 1.0,
) -> RunStats:
    loss_value, loss_finite = numbers[0], bool(numbers[1])
    n, k = len(named), sum(g is not None for g in grads)
    weight_norms = numbers[2 : 2 + n]
    l2, mx, nz = (numbers[2 + n + i * k : 2 + n + (i + 1) * k] for i in range(3))
    grad_iter = iter(grads)
    present_index = 0
    params = []
    for (name, p), wn in zip(named, weight_norms, strict=False):
        module = name.rpartition(".")[0]
        g = next(grad_iter) if p.requires_grad else None
        if g is None:
            params.append(_param(name, module, p, wn, order.get(module)))
            continue
        i = present_index
        present_index += 1
        params.append(
            replace(
                _param(name, module, p, wn, order.get(module)),
                has_grad=True,
                grad_norm=l2[i] * factor,
                grad_max=mx[i] * factor,
                zero_fraction=1.0 - nz[i] / max(p.numel(), 1),
                finite=math.isfinite(mx[i]),
            )
        )
    modules = tuple(
        ModuleStats(name, type(m).__name__, name in order, order.get(name))
        for name, m in model.named_modules()
    )
    return RunStats(
        params=tuple(params),
        modules=modules,
        loss_value=None if weighted else loss_value,
        loss_finite=loss_finite,
        loss_requires_grad=target.requires_grad,
        loss_source=source,
        duration_s=duration,
        model_class=type(model).__name__,
        device=str(target.device),
    )


def _param(
    name: str, module: str, p: torch.Tensor, weight_norm: float, depth: int | None
) -> ParamStats:
    return ParamStats(
        name=name,
        module=module,
        shape=tuple(p.shape),
        dtype=str(p.dtype).removeprefix("torch."),
        requires_grad=p.requires_grad,
        has_grad=False,
        weight_norm=weight_norm,
        depth=depth,
    )
