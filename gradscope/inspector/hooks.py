"""Module hooks and the forward+loss replay, written once for probe, explain, graph and script.

Every pass that runs the user's model does the same three things: hook the
modules for the duration of the pass (and always remove the hooks), call the
model on the batch, and find the tensor to differentiate. The user's code
raising is a `UserCodeError` here, whichever pass ran it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.amp import grad_scaler
from torch.nn.modules import module as module_mod

from gradscope.autograd_walk import NodeWalk
from gradscope.errors import TargetError, UserCodeError
from gradscope.hookable import hookable

PreHook = Callable[[str, torch.nn.Module], None]
PostHook = Callable[[str, torch.nn.Module, Any], None]


@contextmanager
def module_hooks(
    model: torch.nn.Module,
    pre: PreHook | None = None,
    post: PostHook | None = None,
    only: Callable[[torch.nn.Module], bool] | None = None,
) -> Iterator[None]:
    """Call `pre(name, module)` as each module's forward starts and `post(name, module, output)`
    as it ends (also when it raises, output None); every hook is removed on exit."""
    handles = []
    for name, module in model.named_modules():
        if (only is not None and not only(module)) or not hookable(module):
            continue
        if pre is not None:

            def enter(m: Any, _args: Any, name: str = name) -> None:
                pre(name, m)

            handles.append(module.register_forward_pre_hook(enter))
        if post is not None:

            def leave(m: Any, _args: Any, out: Any = None, name: str = name) -> None:
                post(name, m, out)  # returns None: a value would replace the output

            handles.append(module.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def global_module_hooks(
    pre: Callable[[torch.nn.Module], None], post: Callable[[torch.nn.Module], None] | None = None
) -> Iterator[None]:
    """The same for every module of every model (a script's models are not known in advance;
    one registration instead of one per module is also the cheap way to watch a large model)."""

    with ExitStack() as stack:
        handle = module_mod.register_module_forward_pre_hook(lambda m, _a: pre(m))
        stack.callback(handle.remove)
        if post is not None:
            leave = post
            handle = module_mod.register_module_forward_hook(
                lambda m, _a, _o: leave(m), always_call=True
            )
            stack.callback(handle.remove)
        yield


def call_model(model: torch.nn.Module, batch: Any) -> Any:
    """`model(batch)`, spreading a dict as keywords and a tuple/list as positional arguments."""
    if isinstance(batch, Mapping):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def forward(model: torch.nn.Module, batch: Any) -> Any:
    """The user's forward pass on the batch cut from any graph it came from; their exception
    becomes one line (exit 2)."""
    try:
        return call_model(model, cut(batch))
    except Exception as exc:
        raise UserCodeError("forward pass", exc) from exc


def cut(batch: Any) -> Any:
    """The batch with each tensor that requires grad replaced by a detached alias (same
    storage, same flag), in dicts, lists and tuples; the batch itself when none does.

    gradscope's backward then stops at the batch: it runs no hook the user put on a batch
    tensor, and does not free the graph an activation given as the batch came from (the
    user's own backward through it still works after the pass)."""
    if isinstance(batch, torch.Tensor):
        return batch.detach().requires_grad_() if batch.requires_grad else batch
    if isinstance(batch, Mapping):
        changed = {k: c for k, v in batch.items() if (c := cut(v)) is not v}
        if not changed:
            return batch
        if type(batch) is dict:
            return {**batch, **changed}
        out = copy.copy(batch)  # a dict subclass (HF BatchEncoding): its own type, copied
        for k, v in changed.items():
            out[k] = v  # type: ignore[index]
        return out
    if isinstance(batch, (tuple, list)):
        items = [cut(v) for v in batch]
        if all(a is b for a, b in zip(items, batch, strict=True)):
            return batch
        if hasattr(batch, "_fields"):  # a namedtuple
            return type(batch)(*items)
        return type(batch)(items) if type(batch) in (tuple, list) else items
    return batch


def forward_and_loss(
    model: torch.nn.Module,
    batch: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    grad_outputs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, str]:
    """Forward and the tensor backward runs on, and how it was found (said in the report)."""
    return backward_target(forward(model, batch), loss_fn, grad_outputs)


def backward_target(
    output: Any, loss_fn: Callable[[Any], Any] | None, grad_outputs: torch.Tensor | None
) -> tuple[torch.Tensor, str]:
    """The loss (or the output that `grad_outputs` weights), and how it was found."""
    if grad_outputs is None:
        return pick_loss(output, loss_fn)
    target = _call_loss_fn(loss_fn, output) if loss_fn is not None else output
    if not isinstance(target, torch.Tensor) or target.shape != grad_outputs.shape:
        shape = tuple(target.shape) if isinstance(target, torch.Tensor) else type(target).__name__
        raise TargetError(
            f"grad_outputs has shape {tuple(grad_outputs.shape)} but the output "
            f"to weight is {shape}"
        )
    return target, f"output (shape {tuple(target.shape)}) with explicit gradient weights"


def _call_loss_fn(loss_fn: Callable[[Any], Any], output: Any) -> Any:
    try:
        return loss_fn(output)
    except Exception as exc:
        raise UserCodeError("loss_fn", exc) from exc


def pick_loss(output: Any, loss_fn: Callable[[Any], Any] | None) -> tuple[torch.Tensor, str]:
    """The tensor to differentiate, and how it was found (stated in the report)."""
    if loss_fn is not None:
        loss = _call_loss_fn(loss_fn, output)
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
    tensors = [t for t in tensors_in(output) if t.is_floating_point() or t.is_complex()]
    if not tensors:
        raise TargetError(
            f"cannot find a loss: the model returned {type(output).__name__} "
            "with no floating-point tensor; give the target a loss_fn"
        )
    fixed = [fixed_sum_dim(t) for t in tensors]
    total = stand_in_mean(tensors[0], fixed[0] is not None)
    for t, d in zip(tensors[1:], fixed[1:], strict=True):
        total = total + stand_in_mean(t, d is not None)
    dim = next((d for d in fixed if d is not None), None)
    ramp = (
        ""
        if dim is None
        else f"; every slice along dim {dim} sums to one value, so the plain mean has no "
        "gradient and a fixed ramp of weights stands in"
    )
    return total, (
        f"mean of the output (no loss_fn, no scalar output, no .loss{ramp})"
        if len(tensors) == 1
        else f"sum of the means of the {len(tensors)} output tensors (no loss_fn{ramp})"
    )


def fixed_sum_dim(t: torch.Tensor) -> int | None:
    """A dim along which every slice of `t` sums to one value: a softmax's rows sum to 1,
    a LayerNorm's to the sum of its bias, a training BatchNorm's columns likewise. The plain
    mean of such an output is the same for any input, so nothing below it gets a gradient
    from it: a stand-in loss of that mean would read as vanishing gradients."""
    if t.is_complex() or t.dim() == 0:
        return None
    x = t.detach().float()
    if x.numel() < 2:
        return None
    low, high = torch.aminmax(x)
    peak = max(abs(float(low)), abs(float(high)))
    for d in range(x.dim()):
        if x.shape[d] < 2 or x.numel() == x.shape[d]:
            continue  # one slice only: nothing to compare its sum with
        sums = x.sum(d)
        spread = float(sums.max() - sums.min())
        if spread <= 1e-6 * peak * x.shape[d] + 1e-12:
            return d
    return None


def stand_in_mean(t: torch.Tensor, ramped: bool) -> torch.Tensor:
    """The output's mean, weighted by a fixed ramp over its elements where its plain mean is
    fixed (`fixed_sum_dim`): the ramp varies along every dim, so no normalisation cancels it."""
    x = t.float()
    if not ramped:
        return x.mean()
    ramp = torch.linspace(0.5, 1.5, x.numel(), device=x.device).view(x.shape)
    return (x * ramp).mean()


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor inside nested tuples, lists, dicts and dataclasses, without recursion."""
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


def graph_nodes(*roots: torch.Tensor) -> set[Any]:
    """Every backward node reachable from `roots` (the loss's own graph), without recursion."""
    return reachable(t.grad_fn for t in roots if t.grad_fn is not None)


def reachable(nodes: Iterable[Any]) -> set[Any]:
    """These backward nodes and every node behind them, without recursion."""
    return set(NodeWalk(nodes))


@dataclass(frozen=True)
class LossScale:
    """A loss that went through `GradScaler.scale`: the unscaled loss and the factor."""

    loss: torch.Tensor
    value: float


class LossScales:
    """Every `GradScaler.scale(loss)` made while watching, looked up by the scaled tensor."""

    def __init__(self) -> None:
        self._made: dict[int, tuple[torch.Tensor, torch.Tensor, Any]] = {}

    def record(self, scaled: Any, loss: Any, scaler: Any) -> None:
        if isinstance(scaled, torch.Tensor) and isinstance(loss, torch.Tensor):
            if scaled is not loss:  # a disabled scaler returns its input
                self._made[id(scaled)] = (scaled, loss, scaler)

    def get(self, tensor: torch.Tensor) -> LossScale | None:
        made = self._made.get(id(tensor))
        if made is None or made[0] is not tensor:
            return None
        _, loss, scaler = made
        return LossScale(loss, float(scaler.get_scale()))


@contextmanager
def loss_scales() -> Iterator[LossScales]:
    """Note what every GradScaler scales (a script's `scaler.scale(loss).backward()`, or a
    loss_fn that returns a scaled loss), so that the scale can be taken off again."""

    found = LossScales()
    original = grad_scaler.GradScaler.scale

    def scale(self: Any, outputs: Any) -> Any:
        scaled = original(self, outputs)
        found.record(scaled, outputs, self)
        return scaled

    grad_scaler.GradScaler.scale = scale  # type: ignore[method-assign]
    try:
        yield found
    finally:
        grad_scaler.GradScaler.scale = original  # type: ignore[method-assign]
