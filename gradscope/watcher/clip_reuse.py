"""torch's `clip_grad_norm_` finished from the gradient norms the watch took just before
it, so that a CPU step reads its gradients once, not twice.

On the CPU the watch's fused norm is torch's own call (`torch._foreach_norm` of the same
gradients, in their dtype, each tensor's norm taken alone), and torch's total is the
2-norm of those norms stacked in the parameters' order: the same values in the same
order give the same total, bit for bit. Anything else runs torch's own clip: another
norm type or argument, a device, a dtype the watch widened (a norm of 0, inf or NaN in
float32 is taken again in float64), a scaled clip, a gradient another thread steps, a
parameter the watch does not track, or a `clip_grad_norm_` that is not torch's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.utils import clip_grad

_CLIP_WITH_NORM = getattr(clip_grad, "_clip_grads_with_norm_", None)


def is_torchs(original: Any) -> bool:
    """`original` is torch's own `clip_grad_norm_` (no other library's wrapper of it)."""
    code = getattr(original, "__code__", None)
    inner = getattr(getattr(original, "__wrapped__", None), "__code__", None)
    return (
        _CLIP_WITH_NORM is not None
        and code is not None
        and inner is not None
        and code.co_filename == clip_grad.__file__
        and inner.co_filename == clip_grad.__file__
        and inner.co_name == "clip_grad_norm_"
    )


def total(
    state: Any, params: list[torch.Tensor], norms: torch.Tensor | None, norm_type: Any
) -> torch.Tensor | None:
    """The total torch would compute for the gradients of `params` from `norms` (the
    watch's [P] vector of the tracked parameters), or None where it may differ."""
    if norms is None or not norms.is_cpu or norm_type != 2.0:
        return None
    index, where = state.tracked.index, []
    for p in params:
        g = p.grad
        if g is None:
            continue
        i = index.get(id(p))
        if i is None or type(g) is not torch.Tensor or g.layout != torch.strided:
            return None
        if g.dtype != norms.dtype or not g.is_cpu:
            return None
        where.append(i)
    if not where:
        return None
    values = norms.tolist()
    if any(values[i] < 0 for i in where):  # -1: another thread's gradient
        return None
    if where != list(range(len(values))):
        norms = norms[state.measure.positions(tuple(where))]
    with torch.no_grad():
        return torch.linalg.vector_norm(norms, 2.0)


def clip(params: list[torch.Tensor], max_norm: float, total_: torch.Tensor) -> torch.Tensor:
    """The rest of torch's `clip_grad_norm_`: the gradients scaled by the total it gave."""
    with torch.no_grad():
        _CLIP_WITH_NORM(params, max_norm, total_, None)  # type: ignore[misc]
    return total_
