"""What a module's own parameters were as it first ran, to tell a data-dependent
initialisation (Glow's ActNorm set from its first batch, often through `.data`, which no
version counter sees) from the gradient the backward then takes at that point."""

from __future__ import annotations

import torch
from torch import nn

SMALL = 1 << 16
"""Parameters up to this many elements are copied as their module first runs (per-channel
shifts and scales, what a data-dependent initialisation sets, often through `.data`, which
no version counter sees); copying a large weight would double a large model's memory."""


def as_entered(module: nn.Module) -> dict[int, tuple[torch.Tensor, int, torch.Tensor | None]]:
    return {
        id(p): (p, p._version, p.detach().clone() if p.numel() <= SMALL else None)
        for p in module._parameters.values()
        if p is not None and p.requires_grad
    }


def changed(entries: list[tuple[torch.Tensor, int, torch.Tensor | None]]) -> list[bool]:
    """Whether each parameter changed since its entry: its version moved, or its values
    differ from the copy (compared on its device, read back once)."""
    moved = [p._version != version for p, version, _ in entries]
    compared = [i for i, (_, _, copy) in enumerate(entries) if copy is not None and not moved[i]]
    if not compared:
        return moved
    try:
        with torch.no_grad():
            differ = [bool(v) for v in _differ([entries[i] for i in compared])]
    except Exception:  # a tensor kind torch cannot compare here (a sharded one): unchanged
        return moved
    for i, flag in zip(compared, differ, strict=True):
        moved[i] = flag
    return moved


def _differ(entries: list[tuple[torch.Tensor, int, torch.Tensor | None]]) -> list[bool]:
    flags = [(p.detach() != copy).any() for p, _, copy in entries if copy is not None]
    return torch.stack([f.to(flags[0].device) for f in flags]).tolist()
