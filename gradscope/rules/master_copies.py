"""Model weights an optimizer steps through a copy of their values (GS411): mixed precision's
fp32 master weights (apex's FP16_Optimizer, Megatron), or a ZeRO-style sharded optimizer
holding the flattened weights in shards. The model's tensors are in no param group; the
script hands their gradients to the copy, steps it, and writes its values back. Told by the
values: tensors in no model, stepped by an optimizer, holding as many elements as the
gradient-fed tensors left out, with the same values at the first step (up to the rounding of
a half-precision copy). No torch."""

from __future__ import annotations

import math
from collections.abc import Callable
from math import prod

from gradscope.findings import RULES, Finding
from gradscope.fmt import num
from gradscope.rules.step_common import values_changed
from gradscope.steps.records import ParamInfo, WatchRun

HALF_ROUNDING = 2.0**-8
"""A bfloat16 copy's relative rounding (8 bits of mantissa): a norm of the same values read
in another precision stays within it."""


def stepped_copy(run: WatchRun, fed: Callable[[int], bool]) -> tuple[int, ...]:
    """The positions of the stepped tensors outside every model that hold the values of the
    tensors left out of every optimizer that `fed` says get gradients: () where there are
    none, or where their element counts or first values differ (a Hebbian layer, a learned
    lr's model: the optimizer steps something else)."""
    left = [i for i, p in enumerate(run.params) if _left_out(p) and fed(i)]
    copies = [i for i, p in enumerate(run.params) if p.in_optimizer and not p.in_model]
    if not left or not copies or _elements(run, left) != _elements(run, copies):
        return ()
    a, b = _squared_norm(run, left), _squared_norm(run, copies)
    if a is None or b is None or abs(a - b) > 2 * HALF_ROUNDING * max(a, b, 1e-30):
        return ()
    return tuple(copies)


def finding(run: WatchRun, p: ParamInfo, copies: tuple[int, ...]) -> Finding | None:
    """None where its values changed (the copy's are written back: nothing to judge, as
    masters.py says of a low-precision model's masters); the error where they never did:
    the optimizer trains a copy the model never reads."""
    if values_changed(p):
        return None
    names = [run.params[j].name for j in copies]
    held = f"{len(names)} tensor(s) in no model ({', '.join(names[:3])}{' …' * (len(names) > 3)})"
    evidence = (
        f"optimizers: {', '.join(run.optimizers)}",
        f"the stepped copy: {held}, as many elements as the model's tensors left out, with "
        "their values at the first step",
    )
    copied = (
        f"{p.name} is in no optimizer param group; an optimizer steps a copy of its values "
        "(fp32 master weights, or a flat shard of a sharded optimizer)"
    )
    return RULES["GS411"].finding(
        p.name,
        f"{copied}, while its own values never changed (norm {num(p.weight_norm)} at the "
        "first step and at the end): the copy's values are never written back, so the "
        "model the loss is computed with never learns",
        "after each optimizer step, copy the stepped values back into the model's weights "
        "(p.data.copy_(master), or unflatten the shards into them)",
        evidence=evidence,
    )


def _left_out(p: ParamInfo) -> bool:
    return p.requires_grad and not p.in_optimizer and p.in_model


def _elements(run: WatchRun, at: list[int]) -> int:
    return sum(prod(run.params[i].shape) for i in at)


def _squared_norm(run: WatchRun, at: list[int]) -> float | None:
    """The sum of the squared first norms, or None where one was not read."""
    norms = [run.params[i].weight_norm for i in at]
    if any(v is None or not math.isfinite(v) for v in norms):
        return None
    return sum(v * v for v in norms if v is not None)
