"""adam_rms.py's per-tensor sums for many small tensors at once: a dozen fused (foreach)
ops for a batch of tensors instead of about twenty small ops per tensor (a 0.4M-parameter
char-LM's 28 tensors: ~560 ops at each sampled step). A batch holds contiguous tensors of
one device and dtype whose elements add up to at most `limit` (each temporary is then
no larger than one piece of adam_rms's own); any other tensor is taken alone as before.
"""

from __future__ import annotations

from typing import Any

import torch

from gradscope.watcher.measure import norms

Item = tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, float, float, float]
"""(position, g, m, v, floor, bias, first): bias = 1 - β2^t, first = 1 - β1^t, floor =
bias·eps², all on the host."""


def batchable(g: Any, m: Any, v: Any, floor: Any, bias: Any, first: Any, limit: int) -> bool:
    """Plain contiguous g, m, v alike (float32 or float64), host-side scalars, small."""
    tensors = (g, m, v)
    if any(type(t) is not torch.Tensor or not t.is_contiguous() for t in tensors):
        return False
    if not all(isinstance(x, float) for x in (floor, bias, first)):
        return False
    same = g.shape == m.shape == v.shape and g.device == m.device == v.device
    return (
        same
        and g.dtype == m.dtype == v.dtype in (torch.float32, torch.float64)
        and (v.numel() <= limit)
    )


def chunks(items: list[Item], limit: int) -> list[list[Item]]:
    """Consecutive items of one device and dtype, at most `limit` elements a chunk."""
    out: list[list[Item]] = []
    size = 0
    for item in items:
        v = item[3]
        last = out[-1][-1][3] if out else None
        if (
            last is None
            or size + v.numel() > limit
            or (last.device, last.dtype)
            != (
                v.device,
                v.dtype,
            )
        ):
            out.append([])
            size = 0
        out[-1].append(item)
        size += v.numel()
    return out


def rows(chunk: list[Item], eps: float) -> torch.Tensor:
    """[k, 5]: per tensor Σ g²/max(v̂, eps²), Σ û², elements, under eps, v > 0 (float64).
    With r = √(1 - β2^t), √v̂ = √v/r: the squared norms of r·g/max(√v, r·eps) and
    r·m/(√v + r·eps), from one √v (v is not divided by the bias first: a pass fewer).
    The counts are squared L2 norms of signs (0 or ±1), rounded: exact up to 2^24
    elements (a chunk holds at most `limit`), and a quarter of the CPU of an L1 norm."""
    gs, ms, vs = [c[1] for c in chunk], [c[2] for c in chunk], [c[3] for c in chunk]
    device = vs[0].device
    root_bias = [c[5] ** 0.5 for c in chunk]
    floors = [eps * r for r in root_bias]
    scale = _on_device(root_bias, device)
    roots = torch._foreach_sqrt(vs)
    scaled = torch._foreach_clamp_min(roots, floors)
    ratios = torch._foreach_div(gs, scaled)
    del scaled
    rms = (torch.stack(norms(list(ratios))) * scale).square()
    del ratios
    torch._foreach_add_(roots, floors)
    updates = torch._foreach_div(ms, roots)
    del roots
    up = torch.stack(norms(list(updates))) * scale / _on_device([c[6] for c in chunk], device)
    del updates
    under = torch._foreach_sub(vs, [c[4] for c in chunk])  # < 0 exactly where v < floor
    torch._foreach_clamp_max_(under, 0.0)
    torch._foreach_sign_(under)
    counts = _count([*under, *torch._foreach_sign(vs)])
    below, live = counts[: len(vs)], counts[len(vs) :]
    n = _on_device([float(v.numel()) for v in vs], device)
    return torch.stack([rms, up.square(), n, below - (n - live), live], dim=1)


def _count(signs: list[torch.Tensor]) -> torch.Tensor:
    """Per tensor of 0s and ±1s, how many are not 0 (float64)."""
    return torch.stack(torch._foreach_norm(signs)).double().square().round()


def _on_device(numbers: list[float], device: torch.device) -> torch.Tensor:
    """`numbers` as a float64 vector on `device`: built there, never copied from the host
    (a copy from pageable memory would wait for the device)."""
    if device.type == "cpu":
        return torch.tensor(numbers, dtype=torch.float64)
    return torch.stack([torch.full((), x, dtype=torch.float64, device=device) for x in numbers])
