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


def changed(p: torch.Tensor, version: int, copy: torch.Tensor | None) -> bool:
    if p._version != version:
        return True
    return copy is not None and not torch.equal(copy, p.detach())
