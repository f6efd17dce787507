"""The models a loss trains when none of them was called: a module used through a method
of its own (a Gaussian process's `model.nlml(X, y)`, a VAE's `model.loss(x)`) runs no
forward hook, yet its parameters are leaves of the loss's graph. Their owners are found
from those leaves (one walk of the heap, on this fallback only)."""

from __future__ import annotations

import gc

import torch
from torch import nn

from gradscope.inspector import hooks


def owners(loss: torch.Tensor) -> list[nn.Module]:
    """The outermost of the modules that hold a parameter the loss's graph reaches as
    their own; [] when it reaches no nn.Parameter."""
    params = [
        node.variable
        for node in hooks.graph_nodes(loss)
        if isinstance(getattr(node, "variable", None), nn.Parameter)
    ]
    if not params:
        return []
    wanted = {id(p) for p in params}
    found = [
        m
        for m in gc.get_objects()
        if issubclass(type(m), nn.Module)  # type(): no lazy module proxy asked for its class
        and any(id(p) in wanted for p in m._parameters.values())
    ]
    inner = {id(sub) for m in found for sub in m.modules() if sub is not m}
    outer = {id(m): m for m in found if id(m) not in inner}
    return list(outer.values())
