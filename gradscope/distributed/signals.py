"""Per-rank signals that come free with a gathering: outlier local norms, skipped steps.

Pure functions of numbers gathered from every rank (no torch).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

OUTLIER_FACTOR = 10.0


def skipped_steps(steps: Sequence[int]) -> tuple[int, ...]:
    """Ranks that took fewer optimizer steps than the most any rank took."""
    most = max(steps, default=0)
    return tuple(r for r, s in enumerate(steps) if s < most)


def outlier_ranks(local_norms: Sequence[float], factor: float = OUTLIER_FACTOR) -> tuple[int, ...]:
    """Ranks whose local (pre-all-reduce) gradient norm is non-finite, or above `factor`
    times the median of the other ranks' (a bad data shard, a rank-local bug)."""
    out = []
    for r, v in enumerate(local_norms):
        if not math.isfinite(v):
            out.append(r)
            continue
        others = [x for i, x in enumerate(local_norms) if i != r and math.isfinite(x)]
        if others and v > factor * statistics.median(others) and v > 0:
            out.append(r)
    return tuple(out)
