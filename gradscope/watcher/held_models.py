"""The model the script holds, not a library's shell around it: torchsde's `sdeint` wraps
the user's SDE in modules of its own (ForwardSDE, the logqp augmentation, AdjointSDE) that
live while the graph does, and at the first backward they are the outermost modules that
own the parameters. Named from them, `drift.0.weight` read
`forward_sde._base_sde.drift.0.weight`, names the script never wrote."""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable

import torch
from torch import nn


def held_inside(
    root: nn.Module, owned: dict[int, torch.Tensor], users: Callable[[str], bool]
) -> nn.Module:
    """`root`, or the module of the script's own class inside it that the script's frames
    hold and that owns every tensor of `owned` `root` owns, where `root` is a library's
    class the script holds nowhere (a shell built around its model during a call)."""
    if users(_defined_in(type(root))):
        return root
    held = _frames_modules(users)
    if id(root) in held:
        return root
    mine = {id(p) for p in root.parameters() if id(p) in owned}
    for inner in root.modules():
        if id(inner) not in held or not users(_defined_in(type(inner))):
            continue
        if mine <= {id(p) for p in inner.parameters()}:
            return inner
    return root


def _frames_modules(users: Callable[[str], bool]) -> set[int]:
    """ids of the modules the running frames of the script's own code bind by name."""
    out: set[int] = set()
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if users(frame.f_code.co_filename):
            for scope in (frame.f_locals, frame.f_globals):
                out.update(id(v) for v in list(scope.values()) if isinstance(v, nn.Module))
        frame = frame.f_back
    return out


def _defined_in(cls: type) -> str:
    try:
        return inspect.getfile(cls)
    except (TypeError, OSError):
        return "<unknown>"
