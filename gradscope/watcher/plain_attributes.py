"""Leaf tensors a model keeps as plain attributes (`self.w_im = torch.randn(...)
.requires_grad_()`), or in a plain list, tuple or dict attribute (`self.z = [torch.randn(8,
requires_grad=True) for _ in range(3)]`, a hypernetwork's layer embeddings), rather than
as registered nn.Parameters: `model.parameters()` does not list them, so an optimizer built
from it never holds them, though the loss reaches them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

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
                for inside, tensor in _tensors(attr, value):
                    if id(tensor) in wanted:
                        name = f"{path}.{inside}" if path else inside
                        found.setdefault(id(tensor), name if len(roots) == 1 else f"{k}.{name}")
    return found


def _tensors(attr: str, value: Any) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors an attribute holds, named as the script reaches them: itself (`w_im`),
    the items of a plain list or tuple (`z[0]`) or the string-keyed items of a dict
    (`z['layer1']`)."""
    if isinstance(value, torch.Tensor):
        yield attr, value
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if isinstance(item, torch.Tensor):
                yield f"{attr}[{i}]", item
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and isinstance(item, torch.Tensor):
                yield f"{attr}[{key!r}]", item
