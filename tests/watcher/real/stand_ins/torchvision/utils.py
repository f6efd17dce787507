"""torchvision.utils.save_image as a no-op: the tests write no image files."""

from __future__ import annotations


def save_image(tensor, fp, **kwargs) -> None:
    return None
