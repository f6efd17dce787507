"""Leaf tensors a model keeps as plain attributes (`self.w_im = torch.randn(...)
.requires_grad_()`) rather than as registered nn.Parameters: `model.parameters()` does not
list them, so an optimizer built from it never holds them, though the loss reaches them."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def held_by(roots: Sequence[nn.Module], tensors: Sequence[torch.Tensor]) -> dict[int, str]:
    """id(tensor) → its dotted name in the model that keeps it as a plain attribute; a
    second model's names take its index's place (`1.spec.w_im`) only where several hold one."""
    wanted = {id(t) for t in tensors}
    found: dict[int, str] = {}
    for k, root in enumerate(roots):
        for path, module in root.named_modules():
            for attr, value in vars(module).items():
                if isinstance(value, torch.Tensor) and id(value) in wanted:
                    name = f"{path}.{attr}" if path else attr
                    found.setdefault(id(value), name if len(roots) == 1 else f"{k}.{name}")
    return found
