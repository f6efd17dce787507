"""Which tensors of an optimizer's step have their update derived from its state, and
which are copied (updates.py): torch's own Adam, AdamW and SGD can be derived; Adam's
tensors are copied instead where a copy fits, and a rotated step takes one tensor in
ROTATION."""

from __future__ import annotations

import inspect
from typing import Any

import torch

EXACT = (torch.float32, torch.float64)
ROTATION = 16
"""At the other dense steps, tensor k is derived at the steps s with (k + s) % ROTATION
== 0: each tensor in turn, the same ones on every rank (5 or 6 ratios a tensor over steps
11-100 for the rules' medians; one in 8 cost 4.4 ms of a 10M-parameter GPT's 191 ms step,
one in 16 about half)."""

Plan = list[tuple[str, dict[str, Any], list[torch.Tensor]]]
"""(kind, param group, its parameters whose update is derived after the step)."""


def derivable(optimizer: Any) -> Any:
    """torch's Adam/AdamW/SGD (not a subclass with its own step), also behind a wrapper
    that shares its param groups (accelerate's AcceleratedOptimizer); else None."""
    for candidate in (optimizer, getattr(optimizer, "optimizer", None)):
        if candidate is None or kind_of(candidate) is None:
            continue
        if candidate is optimizer or candidate.param_groups is optimizer.param_groups:
            return candidate
    return None


def kind_of(optimizer: Any) -> str | None:
    """ "adam" or "sgd" when the class steps with torch's own function. Optimizer's
    __init__ wraps each class's step (profile_hook_step, functools.wraps), so the
    functions are compared unwrapped."""
    step = getattr(type(optimizer), "step", None)
    if step is None:
        return None
    step = inspect.unwrap(step)
    if step is inspect.unwrap(torch.optim.Adam.step):
        return "adam"
    if step is inspect.unwrap(torch.optim.SGD.step):
        return "sgd"
    return None


def plan(optimizer: Any, index: dict[int, int]) -> Plan:
    """Per param group whose hyperparameters are on the host, its tracked parameters
    whose update the formulas give exactly."""
    kind = kind_of(optimizer)
    assert kind is not None
    keys = ("lr", "weight_decay", *(("betas",) if kind == "adam" else ("momentum", "dampening")))
    out = []
    for group in optimizer.param_groups:
        if not all(_on_host(group.get(k)) for k in keys):
            continue  # a hyperparameter on the device: reading it would sync
        if host_float(group["lr"]) * host_float(group["weight_decay"]) == 1:
            continue  # the decay erased the weights: nothing to derive them back from
        ps = [p for p in group["params"] if id(p) in index and _exact(p)]
        if ps:
            out.append((kind, group, ps))
    return out


def copy_instead(derived: Plan, room: int) -> tuple[Plan, list[torch.Tensor]]:
    """The plan without the Adam tensors that a copy of at most `room` bytes takes (in
    order; plain tensors, not a data-parallel shard), and those tensors."""
    out, instead = [], []
    for kind, group, ps in derived:
        kept = []
        for p in ps:
            bytes_ = size([p])
            if kind == "adam" and bytes_ <= room and not hasattr(p, "to_local"):
                instead.append(p)
                room -= bytes_
            else:
                kept.append(p)
        if kept:
            out.append((kind, group, kept))
    return out, instead


def size(tensors: list[torch.Tensor]) -> int:
    """Their bytes."""
    return sum(p.numel() * p.element_size() for p in tensors)


def turn_of(derived: Plan, index: dict[int, int], step: int) -> Plan:
    """The plan cut to the tensors whose turn step `step` is (see ROTATION)."""
    out = []
    for kind, group, ps in derived:
        mine = [p for p in ps if (index[id(p)] + step) % ROTATION == 0]
        if mine:
            out.append((kind, group, mine))
    return out


def _on_host(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_on_host(v) for v in value)
    return not isinstance(value, torch.Tensor) or value.device.type == "cpu"


def _exact(p: torch.Tensor) -> bool:
    """Derived exactly: a real float32/float64 parameter without a sparse gradient (the
    update of a half-precision weight is mostly rounding, which only a copy sees)."""
    grad = p.grad
    return p.dtype in EXACT and (grad is None or not grad.is_sparse)


def host_float(value: Any) -> float:
    """A hyperparameter as a Python float (a 0-dim CPU tensor read for free)."""
    return float(value.item() if isinstance(value, torch.Tensor) else value)
