"""One instrumented forward+backward pass → RunStats.

Cheap by design: forward hooks only record which modules ran and in what
order; gradients come from `torch.autograd.grad` (so the user's `.grad`
fields are never touched); all statistics are computed with fused foreach
reductions and read back with a single host sync.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import torch

from gradscope.errors import TargetError, UserCodeError
from gradscope.stats import ModuleStats, ParamStats, RunStats


def call_model(model: torch.nn.Module, batch: Any) -> Any:
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def pick_loss(output: Any, loss_fn: Callable[[Any], Any] | None) -> tuple[torch.Tensor, str]:
    """The tensor to differentiate, and how it was found (stated in the report)."""
    if loss_fn is not None:
        try:
            loss = loss_fn(output)
        except Exception as exc:
            raise UserCodeError("loss_fn", exc) from exc
        if not isinstance(loss, torch.Tensor):
            raise TargetError(f"loss_fn returned {type(loss).__name__}, not a tensor")
        if loss.numel() != 1:
            return loss.float().mean(), f"mean of loss_fn(output) (shape {tuple(loss.shape)})"
        return loss, "loss_fn(output)"
    if isinstance(output, torch.Tensor) and output.numel() == 1:
        return output, "scalar output"
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss, "output.loss"
    if isinstance(output, Mapping) and isinstance(output.get("loss"), torch.Tensor):
        return output["loss"], 'output["loss"]'
    tensors = [t for t in _tensors(output) if t.is_floating_point() or t.is_complex()]
    if not tensors:
        raise TargetError(
            f"cannot find a loss: the model returned {type(output).__name__} "
            "with no floating-point tensor; give the target a loss_fn"
        )
    total = tensors[0].float().mean()
    for t in tensors[1:]:
        total = total + t.float().mean()
    return total, (
        "mean of the output (no loss_fn, no scalar output, no .loss)"
        if len(tensors) == 1
        else f"sum of the means of the {len(tensors)} output tensors (no loss_fn)"
    )


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            yield v
        elif isinstance(v, Mapping):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
        elif hasattr(v, "__dataclass_fields__"):
            stack.extend(reversed([getattr(v, f) for f in v.__dataclass_fields__]))


@contextmanager
def module_order(model: torch.nn.Module) -> Iterator[dict[str, int]]:
    """Record the order in which modules are first entered, then remove the hooks."""
    order: dict[str, int] = {}
    handles = []
    for name, module in model.named_modules():

        def hook(_m: Any, _i: Any, name: str = name) -> None:
            order.setdefault(name, len(order))

        handles.append(module.register_forward_pre_hook(hook))
    try:
        yield order
    finally:
        for h in handles:
            h.remove()


@contextmanager
def preserved_state(model: torch.nn.Module) -> Iterator[None]:
    """Leave buffers (BatchNorm statistics), mode and the RNG exactly as they were."""
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    modes = [(m, m.training) for m in model.modules()]
    devices = sorted(
        {b.device.index or 0 for b, _ in buffers if b.is_cuda}
        | {p.device.index or 0 for p in model.parameters() if p.is_cuda}
    )
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
        for m, training in modes:
            m.training = training


def run(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    grad_outputs: torch.Tensor | None = None,
) -> RunStats:
    """Forward, backward and statistics, with the model left as it was found."""
    saved: dict[tuple[int, int], int] = {}
    with preserved_state(model), module_order(model) as order, torch.enable_grad():
        start = time.perf_counter()
        try:
            with saved_tensor_sizes(saved):
                output = call_model(model, batch)
        except Exception as exc:
            raise UserCodeError("forward pass", exc) from exc
        target, source = _backward_target(output, loss_fn, grad_outputs)
        return measure(model, target, grad_outputs, source, order, start, saved)


def measure(
    model: torch.nn.Module,
    target: torch.Tensor,
    grad_outputs: torch.Tensor | None,
    source: str,
    order: dict[str, int],
    start: float,
    saved: dict[tuple[int, int], int],
) -> RunStats:
    """Backward from `target` (already computed by a forward) and the fused statistics."""
    named = list(model.named_parameters())
    trainable = [p for _, p in named if p.requires_grad]
    grads: list[torch.Tensor | None] = [None] * len(trainable)
    if target.requires_grad and trainable:
        try:
            grads = list(torch.autograd.grad(target, trainable, grad_outputs, allow_unused=True))
        except Exception as exc:
            raise UserCodeError("backward pass", exc) from exc
    with torch.no_grad():
        numbers = _fused_stats(target, [p for _, p in named], grads)
    duration = time.perf_counter() - start
    stats = _assemble(
        model, named, grads, numbers, order, target, source, duration, grad_outputs is not None
    )
    return replace(stats, saved_bytes=sum(saved.values()), retained=retained_graphs(model))


@contextmanager
def saved_tensor_sizes(sizes: dict[tuple[int, int], int]) -> Iterator[None]:
    """Bytes the forward saves for backward, each storage once (the activation memory)."""

    def pack(t: torch.Tensor) -> torch.Tensor:
        sizes[(t.untyped_storage().data_ptr(), t.storage_offset())] = t.numel() * t.element_size()
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


def _backward_target(
    output: Any, loss_fn: Callable[[Any], Any] | None, grad_outputs: torch.Tensor | None
) -> tuple[torch.Tensor, str]:
    if grad_outputs is None:
        return pick_loss(output, loss_fn)
    target = output
    if loss_fn is not None:
        try:
            target = loss_fn(output)
        except Exception as exc:
            raise UserCodeError("loss_fn", exc) from exc
    if not isinstance(target, torch.Tensor) or target.shape != grad_outputs.shape:
        shape = tuple(target.shape) if isinstance(target, torch.Tensor) else type(target).__name__
        raise TargetError(
            f"grad_outputs has shape {tuple(grad_outputs.shape)} but the output "
            f"to weight is {shape}"
        )
    return target, f"output (shape {tuple(target.shape)}) with explicit gradient weights"


def _norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """L2 norms by one fused op; half precision is accumulated in float32 so it cannot overflow."""
    low = any(t.dtype in (torch.float16, torch.bfloat16) for t in tensors)
    return torch.stack(torch._foreach_norm(tensors, 2, dtype=torch.float32 if low else None))


def _fused_stats(
    target: torch.Tensor, params: list[torch.Tensor], grads: list[torch.Tensor | None]
) -> list[float]:
    """[loss, loss_finite, weight norms..., per present grad: l2, max|g|, nonzeros] in one sync.

    max|g| comes from aminmax, a single pass that also propagates NaN, so it
    doubles as the non-finite test (an L2 norm can overflow without any Inf).
    """
    f64 = torch.float64
    present = [g if g.numel() else g.new_zeros(1) for g in grads if g is not None]
    parts = [
        target.detach().reshape(-1)[:1].to(f64)
        if target.numel() == 1
        else torch.full((1,), math.nan, dtype=f64, device=target.device),
        torch.isfinite(target.detach()).all().reshape(1).to(f64),
    ]
    if params:
        parts.append(_norms(params).to(f64))
    if present:
        parts.append(_norms(present).to(f64))
        lows, highs = zip(*(g.aminmax() for g in present), strict=False)
        parts.append(torch.maximum(torch.stack(lows).abs(), torch.stack(highs).abs()).to(f64))
        parts.append(torch.stack([g.count_nonzero() for g in present]).to(f64))
    device = target.device
    return torch.cat([p.to(device) for p in parts]).tolist()


def _assemble(
    model: torch.nn.Module,
    named: list[tuple[str, torch.Tensor]],
    grads: list[torch.Tensor | None],
    numbers: list[float],
    order: dict[str, int],
    target: torch.Tensor,
    source: str,
    duration: float,
    weighted: bool,
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
        common = dict(
            name=name,
            module=module,
            shape=tuple(p.shape),
            dtype=str(p.dtype).removeprefix("torch."),
            requires_grad=p.requires_grad,
            weight_norm=wn,
            depth=order.get(module),
        )
        if g is None:
            params.append(ParamStats(has_grad=False, **common))
            continue
        i = present_index
        present_index += 1
        numel = max(p.numel(), 1)
        params.append(
            ParamStats(
                has_grad=True,
                grad_norm=l2[i],
                grad_max=mx[i],
                zero_fraction=1.0 - nz[i] / numel,
                finite=math.isfinite(mx[i]),
                **common,
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
