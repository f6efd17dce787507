"""DDP's reduction error ("Expected to have finished reduction...", "marked ready twice")
read into the parameters it names and why each got no gradient, with whether its module ran
on another rank in the same forward (from the store, waited for briefly, never a hang)."""

from __future__ import annotations

import json
from datetime import timedelta

from gradscope.distributed import findings, reduction, usage
from gradscope.distributed.context import Rank
from gradscope.findings import Finding

PEER_WAIT_S = 3.0
"""How long a failing rank waits for another rank's facts about the same forward."""


def explained(
    exc: BaseException,
    names: list[str],
    tracker: usage.UsageTracker,
    rank: Rank | None,
    forwards: int,
) -> list[Finding]:
    """DDP's reduction error in names and causes; no collective (ranks may be stuck)."""
    err = reduction.parse(str(exc), names)
    if err is None:
        return []
    if err.kind == "ready-twice":
        twice = err.names
        return [findings.reduction_error(n, "used-twice", False, kind="ready-twice") for n in twice]
    local = {u.name: u for u in tracker.unused()}
    others = _others_ran(rank, forwards)
    out = []
    for name in err.names:
        u = local.get(name)
        cause = u.cause if u else None
        ran_elsewhere = tuple(
            r for r, ran in others.items() if u and u.cause == usage.NEVER_RAN and u.module in ran
        )
        extra = (
            (f"its module ran on rank {', '.join(map(str, ran_elsewhere))}",)
            if ran_elsewhere
            else ()
        )
        where = (f"cut at {u.where}",) if u and u.where else ()
        out.append(findings.reduction_error(name, cause, bool(ran_elsewhere), extra + where))
    return out


def _others_ran(rank: Rank | None, forward: int) -> dict[int, set[str]]:
    """Modules that ran on the other ranks in forward number `forward` (from the store).

    A slower rank may not have published that forward yet when this one fails, so each
    key is waited for, briefly: a rank that is alive gets there within PEER_WAIT_S, one
    that is stuck or dead is left out (never a hang).
    """

    if rank is None or rank.store is None:
        return {}
    out = {}
    for r in range(rank.world):
        key = f"gradscope/ran/{forward}/{r}"
        if r == rank.rank:
            continue
        try:
            rank.store.wait([key], timedelta(seconds=PEER_WAIT_S))
            out[r] = set(json.loads(rank.store.get(key)))
        except RuntimeError:  # not there in time (c10d raises on a wait timeout)
            continue
    return out
