"""Per-parameter fingerprints of a replica, and the comparison between ranks.

Replicas of a DDP model (and the replicated parameters of other layouts) hold
bitwise-equal weights after every step: the all-reduced gradients are the same
bytes on every rank. A fingerprint is four float64 numbers per parameter (sum
and L2 of the weight and of its gradient) and two per buffer (sum and L2), so
comparing ranks costs one small gather instead of shipping the tensors.
Sharded DTensors hold different parts on each rank and are left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WEIGHT_FIELDS = ("weight sum", "weight L2", "grad sum", "grad L2")
BUFFER_FIELDS = ("buffer sum", "buffer L2")


@dataclass(frozen=True)
class Divergence:
    """The first tensor (in model order) whose fingerprint differs between ranks."""

    name: str
    kind: str
    """"parameter" or "buffer"."""
    field: str
    """Which number differs first, e.g. "weight sum"."""
    values: tuple[float, ...]
    """That number on each rank, in rank order."""
    odd_ranks: tuple[int, ...]
    """The ranks that disagree with the majority (for two ranks: rank 1)."""
    count: int
    """How many tensors differ in all."""

    def sentence(self) -> str:
        ranks = ", ".join(map(str, self.odd_ranks))
        per = ", ".join(f"rank {r}: {v:.17g}" for r, v in enumerate(self.values))
        return (
            f"{self.kind} {self.name} differs between ranks ({self.field}: {per}); "
            f"rank {ranks} disagree{'s' if len(self.odd_ranks) == 1 else ''} with the others"
        )


def _odd_ranks(values: Sequence[float]) -> tuple[int, ...]:
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    majority = max(counts, key=lambda v: (counts[v], -values.index(v)))
    return tuple(r for r, v in enumerate(values) if v != majority)


def compare(
    names: Sequence[str],
    kinds: Sequence[str],
    per_rank: Sequence[Sequence[Sequence[float]]],
    fields: Sequence[Sequence[str]],
    rtol: float = 0.0,
) -> Divergence | None:
    """The first divergent tensor, or None when every rank agrees.

    `per_rank[r][i]` is tensor i's numbers on rank r; `fields[i]` names them.
    NaN equals NaN here (a NaN on every rank is not a divergence).
    """
    first: Divergence | None = None
    count = 0
    for i, name in enumerate(names):
        for j, field in enumerate(fields[i]):
            values = tuple(float(per_rank[r][i][j]) for r in range(len(per_rank)))
            if not _differ(values, rtol):
                continue
            count += 1
            if first is None:
                keyed = tuple(v if v == v else float("inf") for v in values)
                first = Divergence(name, kinds[i], field, values, _odd_ranks(keyed), 0)
            break
    return None if first is None else Divergence(**{**first.__dict__, "count": count})


def _differ(values: Sequence[float], rtol: float) -> bool:
    ref = values[0]
    for v in values[1:]:
        if ref != ref and v != v:
            continue
        if (ref != ref) != (v != v):
            return True
        if abs(v - ref) > rtol * max(abs(v), abs(ref)):
            return True
    return False
