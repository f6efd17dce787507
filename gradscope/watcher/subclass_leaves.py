"""Graph leaves seen through a tensor subclass: a wrapper of a parameter made for one
forward (Expanded Weights' per-sample wrapper, as Opacus's grad_sample_mode="ew" uses)
is the leaf its backward reaches, and its `__torch_function__` raises on every function
it does not handle, reading `.grad` included. The watch reads such leaves past it."""

from __future__ import annotations

import torch


def leaf_grad(tensor: torch.Tensor) -> torch.Tensor | None:
    """A graph leaf's `.grad`, read past its subclass's `__torch_function__`: a leaf that
    wraps a parameter for the forward (Expanded Weights' per-sample wrapper) raises on every
    function it does not handle, the attribute read included."""
    if type(tensor) is torch.Tensor or isinstance(tensor, torch.nn.Parameter):
        return tensor.grad
    with torch._C.DisableTorchFunctionSubclass():
        return tensor.grad
