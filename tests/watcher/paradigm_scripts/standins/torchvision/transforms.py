"""The transforms the vendored scripts build: dcgan's ToTensor (FakeData gives tensors
already) and the default BYOL augmentation's, on a batch of image tensors."""

import torch
import torch.nn.functional as F
from torch import nn


class ColorJitter(nn.Identity):
    def __init__(self, *args, **kwargs):
        super().__init__()


class GaussianBlur(ColorJitter):
    pass


class RandomGrayscale(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p = p

    def forward(self, x):
        if torch.rand(()) < self.p:
            return x.mean(dim=-3, keepdim=True).expand_as(x)
        return x


class RandomHorizontalFlip(RandomGrayscale):
    def __init__(self, p=0.5):
        super().__init__(p)

    def forward(self, x):
        return x.flip(-1) if torch.rand(()) < self.p else x


class RandomResizedCrop(nn.Module):
    def __init__(self, size, scale=(0.08, 1.0)):
        super().__init__()
        self.size, self.scale = size, scale

    def forward(self, x):
        h, w = x.shape[-2:]
        area = float(torch.empty(()).uniform_(*self.scale))
        ch, cw = max(1, int(h * area**0.5)), max(1, int(w * area**0.5))
        top = int(torch.randint(0, h - ch + 1, ()))
        left = int(torch.randint(0, w - cw + 1, ()))
        crop = x[..., top : top + ch, left : left + cw]
        return F.interpolate(crop, size=self.size, mode="bilinear", align_corners=False)


class Normalize(nn.Module):
    def __init__(self, mean, std):
        super().__init__()
        self.mean, self.std = torch.as_tensor(mean), torch.as_tensor(std)

    def forward(self, x):
        return (x - self.mean[:, None, None]) / self.std[:, None, None]


class ToTensor:
    def __call__(self, image):
        return image
