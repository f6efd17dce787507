"""Which rank am I, and collectives that cannot hang.

gradscope only joins a process group the user's script has initialised
(`init_process_group`); `current()` is None before that or in a one-process
run. Each gathering writes an arrival key to the group's store before its
collective and waits with a timeout; on a timeout the missing keys name the
ranks that never arrived.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

DEFAULT_TIMEOUT_S = float(os.environ.get("GRADSCOPE_DIST_TIMEOUT", "300"))


class RankTimeout(RuntimeError):
    """A gathering did not complete in time; `missing` are the ranks that never arrived."""

    def __init__(self, what: str, rank: int, missing: tuple[int, ...], timeout_s: float):
        self.missing = missing
        who = (
            "rank " + ", ".join(map(str, missing)) + " did not arrive"
            if missing
            else "every rank arrived but the collective did not finish"
        )
        super().__init__(f"rank {rank}: {what} timed out after {timeout_s:g} s: {who}")


@dataclass
class Rank:
    """This process's place in the user's process group."""

    rank: int
    world: int
    backend: str
    group: Any = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    collectives: int = 0
    """How many collectives gradscope issued (the tests check one per gathering)."""
    gatherings: int = 0
    store: Any = field(default=None, repr=False)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self) -> torch.device:
        """Where this backend's collectives take their tensors."""
        if self.backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def all_reduce(self, values: torch.Tensor, what: str) -> torch.Tensor:
        """Sum `values` over ranks: one collective, bounded in time."""
        out = values.to(self.device()).clone()
        self._run(what, lambda: dist.all_reduce(out, group=self.group, async_op=True))
        return out

    def all_gather(self, values: torch.Tensor, what: str) -> torch.Tensor:
        """Stack every rank's `values` (same shape on each) into [world, ...]: one collective."""
        src = values.to(self.device()).contiguous()
        parts = [torch.empty_like(src) for _ in range(self.world)]
        self._run(what, lambda: dist.all_gather(parts, src, group=self.group, async_op=True))
        return torch.stack(parts)

    def _run(self, what: str, start: Any) -> None:
        seq = self.gatherings
        self.gatherings += 1
        self._arrive(seq)
        self.collectives += 1
        work = start()
        try:
            work.wait(datetime.timedelta(seconds=self.timeout_s))
        except RuntimeError as exc:
            raise RankTimeout(what, self.rank, self.missing(seq), self.timeout_s) from exc

    def _arrive(self, seq: int) -> None:
        if self.store is not None:
            try:
                self.store.set(f"gradscope/arrive/{seq}/{self.rank}", "1")
            except RuntimeError:
                self.store = None

    def missing(self, seq: int) -> tuple[int, ...]:
        """Ranks whose arrival key for gathering `seq` is absent (empty when unknown)."""
        if self.store is None:
            return ()
        keys = [f"gradscope/arrive/{seq}/{r}" for r in range(self.world)]
        try:
            return tuple(r for r, k in enumerate(keys) if not self.store.check([k]))
        except RuntimeError:
            return ()


def current(timeout_s: float = DEFAULT_TIMEOUT_S) -> Rank | None:
    """This process's rank in the user's initialised default group, or None."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    world = dist.get_world_size()
    if world < 2:
        return None
    return Rank(
        dist.get_rank(),
        world,
        str(dist.get_backend()),
        timeout_s=timeout_s,
        store=_store(),
    )


def _store() -> Any:
    """The default group's key-value store (torch has no public getter)."""
    try:
        getter = dist.distributed_c10d._get_default_store
        return getter()
    except (AttributeError, RuntimeError, ValueError):
        return None


def env_rank() -> int | None:
    """The rank torchrun gave this process (RANK), readable before any process group."""
    try:
        return int(os.environ["RANK"])
    except (KeyError, ValueError):
        return None
