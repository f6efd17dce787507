"""The model a script trains when its own forward never ran: a world model whose training
step calls its parts one by one (`wm.cell(...)`, `wm.prior(h)`, `wm.dec(feat)`) runs each part
as a model of its own, so its parameters were named by class (`Linear.weight`) rather than as
the model holds them (`prior.weight`). The module that holds those parts is found from them
(a walk of the heap, only when several parts ran)."""

from __future__ import annotations

import gc

from torch import nn

ROUNDS = 8
"""Levels of parents lifted to at most."""


def lifted(roots: list[nn.Module]) -> list[nn.Module]:
    """`roots`, with the parts of a module that never ran replaced by that module, where
    every parameter it holds is in those parts (a container with parts that did not run,
    or whose parameters the loss did not reach, is left as it was)."""
    for _ in range(ROUNDS):
        if len(roots) < 2:
            return roots
        held = {id(p) for m in roots for p in m.parameters()}
        parents = [p for p in _parents(roots) if _covered(p, held)]
        if not parents:
            return roots
        inside = {id(sub) for p in parents for sub in p.modules()}
        roots = [*{id(p): p for p in parents}.values(), *(m for m in roots if id(m) not in inside)]
    return roots


def _covered(parent: nn.Module, held: set[int]) -> bool:
    own = [id(p) for p in parent.parameters()]
    return bool(own) and all(i in held for i in own)


def _parents(roots: list[nn.Module]) -> list[nn.Module]:
    """The modules that hold one of `roots` as a direct child."""
    ids = {id(m) for m in roots}
    return [
        m
        for m in gc.get_objects()
        if issubclass(type(m), nn.Module)  # type(): no lazy module proxy asked for its class
        and any(id(c) in ids for c in m._modules.values())
    ]
