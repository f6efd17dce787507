"""Per-rank signals that come free with a gathering: outlier local norms, skipped steps.

Pure functions of numbers gathered from every rank (no torch).

An outlier is judged against the other ranks' median, so with 2 ranks it is "one rank's
local norm is `factor` times the other's". Honest shards of the same data differ far
less: for the example DDP loop (batch 16 per rank) the larger of two ranks' local norms
was at most 3.9x the smaller over 300 seeds, but with 2 samples per rank 1% of pairs
passed 48x. One sampled step is therefore not enough where more were sampled: `persistent`
keeps the ranks that stood out in at least two of the sampled steps (or in the only one).
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
    """Ranks whose local (pre-all-reduce) gradient norm is non-finite while another rank's
    is finite, or above `factor` times the median of the other ranks' (a bad data shard,
    a rank-local bug). Every rank non-finite is no one rank's fault: none is named."""
    finite = [x for x in local_norms if math.isfinite(x)]
    if not finite:
        return ()
    out = []
    for r, v in enumerate(local_norms):
        if not math.isfinite(v):
            out.append(r)
            continue
        others = [x for i, x in enumerate(local_norms) if i != r and math.isfinite(x)]
        if others and v > 0 and v > factor * statistics.median(others):
            out.append(r)
    return tuple(out)


def persistent(hits: Sequence[int], observations: int) -> tuple[int, ...]:
    """Indices whose hit count reaches min(2, observations): stood out in two sampled
    steps, or in the only one there was."""
    need = min(2, observations)
    return tuple(i for i, h in enumerate(hits) if need > 0 and h >= need)
