"""Ranks that died meet in the process group's key-value store: no collective, since
the other ranks may be stuck or dead. Each rank that died leaves its error and findings
there, and rank 0 merges them into its report (distributed_hooks.py); a rank that
vanished writes nothing and is found by gradscope.distributed.peers instead."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from gradscope.distributed import peers
from gradscope.findings import RULES
from gradscope.fmt import printable

PEER_WAIT_S = 5.0
"""How long rank 0 waits for the other ranks' crash records."""
REPORT_WAIT_S = 10.0
"""How long a dying rank waits for rank 0 to have written the merged report."""
VANISHED_POLL_S = 0.5
"""How often rank 0, waiting for crash records, looks for ranks that vanished."""


class CrashMeeting:
    """Ranks that died meet in the process group's store (no collective: peers may be
    stuck or dead). Keys: gradscope/died/RANK (its error and findings as JSON) and
    gradscope/reported (rank 0 wrote the merged report)."""

    def __init__(self, store: Any, rank: int, world: int, backend: str | None = None) -> None:
        self.store, self.rank, self.world = store, rank, world
        self.backend = backend
        """The process group's backend (read when the rank died: the script may have
        destroyed its group since)."""

    def _set(self, key: str, value: str) -> bool:
        if self.store is None:
            return False
        try:
            self.store.set(key, value)
            return True
        except Exception:  # the store went with the agent: nothing to meet in
            self.store = None
            return False

    def publish(self, failure: str, findings: list[Any]) -> None:
        record = {"failure": failure, "findings": [f.to_dict() for f in findings]}
        self._set(f"gradscope/died/{self.rank}", json.dumps(record))

    def collect(self, wait_s: float = PEER_WAIT_S) -> tuple[list[Any], tuple[str, ...]]:
        """Rank 0: the findings of the other ranks that died, each marked with its rank,
        and one note per such rank naming its error."""
        found = self.records(wait_s)
        return from_records(found)

    def records(self, wait_s: float = PEER_WAIT_S) -> dict[int, dict[str, Any]]:
        """The other ranks' crash records, and a stand-in for each rank that vanished
        (gradscope.distributed.peers), waiting at most `wait_s` for the others."""
        if self.store is None:
            return {}
        keys = {r: f"gradscope/died/{r}" for r in range(self.world) if r != self.rank}
        deadline = time.monotonic() + wait_s
        found: dict[int, dict[str, Any]] = {}
        looked = -math.inf
        while keys and time.monotonic() < deadline:
            for r, key in list(keys.items()):
                try:
                    if self.store.check([key]):
                        found[r] = json.loads(self.store.get(key))
                        del keys[r]
                except Exception:  # the store is gone: keep what arrived
                    return found
            # a rank that vanished writes nothing: no use waiting for it (looked at twice
            # a second: a few store reads per rank)
            if time.monotonic() - looked >= VANISHED_POLL_S:
                looked = time.monotonic()
                for r in peers.vanished(self.store, self.world, self.rank):
                    if r in keys and not _check(self.store, keys.pop(r)):
                        found[r] = {"failure": peers.VANISHED, "findings": []}
            if keys:
                time.sleep(0.05)
        return found

    def hands_over(self) -> bool:
        """A rank that died, not rank 0, whose record rank 0 can read and whose exit
        wakes rank 0 (gloo closes its connections with the process): it may exit 0 and
        leave the run's exit code to rank 0, which reports its error and findings.
        Otherwise torchrun, seeing it fail, would stop rank 0 before its report."""
        return self.rank != 0 and self.store is not None and self.backend == "gloo"

    def report_written(self) -> None:
        if self.rank == 0:
            self._set("gradscope/reported", "1")
            return
        deadline = time.monotonic() + REPORT_WAIT_S
        while self.store is not None and time.monotonic() < deadline:
            try:
                if self.store.check(["gradscope/reported"]):
                    return
            except Exception:  # the store is gone: rank 0's side has ended
                return
            time.sleep(0.05)


def _check(store: Any, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:
        return False


def from_records(found: dict[int, dict[str, Any]]) -> tuple[list[Any], tuple[str, ...]]:
    findings, notes = [], []
    for r, record in sorted(found.items()):
        failure = printable(str(record.get("failure")))
        cut = failure if len(failure) <= 200 else failure[:199] + "…"
        notes.append(f"rank {r} died: {cut}")
        for d in record.get("findings", []):
            rule = RULES.get(d.get("rule", ""))
            if rule is None:
                continue
            evidence = (f"seen on rank {r}", *d.get("evidence", ()))
            findings.append(
                rule.finding(
                    d["subject"],
                    d["message"].replace("on this rank", f"on rank {r}"),
                    d["advice"],
                    d.get("value"),
                    d.get("threshold"),
                    tuple(evidence),
                )
            )
    return findings, tuple(notes)
