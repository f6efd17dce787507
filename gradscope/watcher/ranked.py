"""`gradscope.watch()` under torchrun: the watcher with the distributed hooks bound, as
`gradscope watch` binds them around a script (FSDP2's shard norms summed over the ranks,
the ranks' findings merged into rank 0's report). No torch at import."""

from __future__ import annotations

from types import TracebackType

from gradscope.watcher.distributed_hooks import DistributedWatch
from gradscope.watcher.session import Watcher

# watcher.state loads torch: imported in functions, as session.py does


class RankedWatcher(Watcher):
    """A Watcher for a process torchrun launched among several."""

    ranks: DistributedWatch | None = None

    def __enter__(self) -> RankedWatcher:
        self.ranks = DistributedWatch()
        super().__enter__()
        self.ranks.bind(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        from gradscope.watcher.state import StopWatching

        assert self.ranks is not None
        if exc is not None and not isinstance(exc, StopWatching):
            self.ranks.error = exc  # no collective after a crash
        swallowed = super().__exit__(exc_type, exc, tb)
        assert self.report is not None  # the Watcher's, whatever ended the block
        self.report = self.ranks.conclude(self.report, self.settings)
        return swallowed
