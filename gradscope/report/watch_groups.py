"""Layer groups for the over-time views: parameters merged by module prefix. No torch."""

from __future__ import annotations

import math

from gradscope.steps.records import StepRecord


def layer_groups(names: list[str], max_groups: int = 16) -> dict[str, list[int]]:
    """Group parameter indices by the deepest module prefix that gives ≤ max_groups groups."""
    depth_max = max((n.count(".") for n in names), default=0)
    best: dict[str, list[int]] = {"model": list(range(len(names)))}
    for depth in range(1, depth_max + 1):
        groups: dict[str, list[int]] = {}
        for i, n in enumerate(names):
            parts = n.split(".")
            key = ".".join(parts[: min(depth, len(parts) - 1)]) or parts[0]
            groups.setdefault(key, []).append(i)
        if len(groups) > max_groups:
            break
        best = groups
    return best


def group_norm(record: StepRecord, members: list[int]) -> float | None:
    """L2 norm over the members' gradients; None when none had a gradient."""
    values = [record.param_norms[i] for i in members if i < len(record.param_norms)]
    present = [v for v in values if v is not None]
    if not present:
        return None
    return math.sqrt(sum(v * v for v in present))


def bins(n: int, width: int) -> list[range]:
    """Split n steps into at most `width` consecutive bins."""
    width = max(1, min(width, n))
    edges = [round(k * n / width) for k in range(width + 1)]
    return [range(edges[k], edges[k + 1]) for k in range(width) if edges[k + 1] > edges[k]]


def binned_max(values: list[float | None], width: int) -> list[float | None]:
    """Per bin the largest finite value (one-step spikes stay visible); NaN/inf count high."""
    out: list[float | None] = []
    for b in bins(len(values), width):
        chunk = [values[i] for i in b if values[i] is not None]
        finite = [v for v in chunk if v is not None and math.isfinite(v)]
        if len(finite) < len(chunk):
            out.append(math.inf)
        else:
            out.append(max(finite) if finite else None)
    return out
