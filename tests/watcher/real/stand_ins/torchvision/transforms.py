"""Stand-ins for the torchvision.transforms the vendored scripts use, on tensors."""

from __future__ import annotations

import torch
from torch.nn import functional as F


class Compose:
    def __init__(self, transforms) -> None:
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """uint8 (H, W) or (C, H, W) → float (C, H, W) in [0, 1]."""

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float() / 255 if x.dtype == torch.uint8 else x.float()
        return x.unsqueeze(0) if x.dim() == 2 else x


class Normalize:
    def __init__(self, mean, std) -> None:
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class Resize:
    def __init__(self, size) -> None:
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if tuple(x.shape[-2:]) == self.size:
            return x
        out = F.interpolate(x.unsqueeze(0).float(), size=self.size, mode="bilinear")
        return out.squeeze(0).to(x.dtype)


class CenterCrop:
    def __init__(self, size) -> None:
        self.size = (size, size) if isinstance(size, int) else tuple(size)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        th, tw = self.size
        top, left = (h - th) // 2, (w - tw) // 2
        return x[..., top : top + th, left : left + tw]
