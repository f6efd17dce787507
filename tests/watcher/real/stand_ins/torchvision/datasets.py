"""Synthetic stand-ins for torchvision.datasets: deterministic per index, never downloaded."""

from __future__ import annotations

import os

import torch


def _size(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


class _Synthetic(torch.utils.data.Dataset):
    def __init__(self, size: int, transform=None, target_transform=None) -> None:
        self.size = size
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self) -> int:
        return self.size

    def _image(self, index: int) -> tuple[torch.Tensor, int]:
        raise NotImplementedError

    def __getitem__(self, index: int):
        if not 0 <= index < self.size:
            raise IndexError(index)
        image, target = self._image(index)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target


class FakeData(_Synthetic):
    """Random uint8 images (C, H, W) and labels, like torchvision.datasets.FakeData."""

    def __init__(
        self,
        size: int | None = None,
        image_size=(3, 224, 224),
        num_classes: int = 10,
        transform=None,
        target_transform=None,
        random_offset: int = 0,
    ) -> None:
        super().__init__(
            _size("GS_FAKE_SIZE", 1000) if size is None else size, transform, target_transform
        )
        self.image_size = tuple(image_size)
        self.num_classes = num_classes
        self.random_offset = random_offset

    def _image(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(index + self.random_offset)
        image = torch.randint(0, 256, self.image_size, generator=g, dtype=torch.uint8)
        target = int(torch.randint(0, self.num_classes, (1,), generator=g))
        return image, target


class MNIST(_Synthetic):
    """28×28 uint8 digits: a fixed random prototype per class plus noise, so a model can
    learn them. `root` and `download` are accepted and ignored."""

    def __init__(
        self,
        root,
        train: bool = True,
        transform=None,
        target_transform=None,
        download: bool = False,
    ) -> None:
        size = _size("GS_FAKE_MNIST_TRAIN", 256) if train else _size("GS_FAKE_MNIST_TEST", 64)
        super().__init__(size, transform, target_transform)
        self.train = train
        g = torch.Generator().manual_seed(1234)
        self.prototypes = (torch.rand(10, 28, 28, generator=g) > 0.7).float()

    def _image(self, index: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(index * 2 + int(self.train))
        target = index % 10
        noisy = self.prototypes[target] * 0.8 + torch.rand(28, 28, generator=g) * 0.2
        return (noisy * 255).to(torch.uint8), target
