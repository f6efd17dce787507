"""Which tensors outside every optimizer are copies of trained ones (a target, an EMA, a
teacher): the same name below another top-level module, the same shape, and the same
values at the start (GS411's copy advice, rules/step_outside.py)."""

from __future__ import annotations

import math

from gradscope.steps.records import ParamInfo, WatchRun


def trained_shapes(run: WatchRun) -> dict[tuple[str, tuple[int, ...]], str]:
    """(name below its top-level module, shape) → name, for the parameters optimizers train."""
    return {
        (p.name.partition(".")[2], p.shape): p.name
        for p in run.params
        if p.in_optimizer and "." in p.name
    }


def started_apart(
    run: WatchRun, trained: dict[tuple[str, tuple[int, ...]], str]
) -> set[tuple[str, str]]:
    """(top-level module, the trained one its names mirror) that started with different
    values: a copy (deep-copied, or loaded with the original's state) starts with the
    original's values, while a network of the same architecture initialised on its own
    (NeRF's fine network beside its coarse one, an ensemble's member) starts elsewhere.
    One pair of tensors whose first norms were both read and are apart is enough (zero
    biases are equal in any two networks)."""
    firsts = {p.name: p.weight_norm for p in run.params}
    apart = set()
    for p in run.params:
        original = copy_of(p, trained)
        a, b = p.weight_norm, firsts.get(original)
        if original and a is not None and b is not None and _apart(a, b):
            apart.add((top(p.name), top(original)))
    return apart


def top(name: str) -> str:
    """The top-level module a parameter's name starts with."""
    return name.partition(".")[0]


def _apart(a: float, b: float) -> bool:
    """Two first norms that no exact copy would give (finite, beyond rounding)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) > 1e-5 * max(abs(a), abs(b), 1e-12)


def copy_of(p: ParamInfo, trained: dict[tuple[str, tuple[int, ...]], str]) -> str:
    """The trained parameter p mirrors (same name below a different top-level module, same
    shape: q_net_target.0.weight of q_net.0.weight), or ""."""
    return trained.get((p.name.partition(".")[2], p.shape), "") if "." in p.name else ""
