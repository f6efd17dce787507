"""`gradscope watch` under torchrun: the one place the watcher meets gradscope.distributed.

`DistributedWatch` starts a distributed `Session` before the script when torchrun
launched several processes (WORLD_SIZE > 1; in any other run it installs nothing), gives
the Recorder a finaliser that turns FSDP2 shard norms (gradients, updates, weights) into
global ones (one all-reduce per read-back, on every rank), and afterwards merges the
Session's cross-rank findings into the watch report. When the script dies it explains
DDP's reduction error without any collective (the other ranks may be stuck). Only
rank 0 writes files and stdout.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradscope.errors import GradscopeError

if TYPE_CHECKING:
    import torch

    from gradscope.config import Settings
    from gradscope.distributed.session import Session
    from gradscope.watcher.report import WatchReport


class RankTimedOut(GradscopeError):
    """A gathering timed out: one line naming the ranks that never arrived, exit 2."""


def launched_rank() -> int:
    """The rank torchrun gave this process (0 when not launched by torchrun)."""
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def launched_world() -> int:
    """How many processes torchrun launched (WORLD_SIZE; 1 when not launched by it)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def is_main_process() -> bool:
    """True on rank 0 and in a run that is not distributed: the process that reports."""
    return launched_rank() == 0


class DistributedWatch:
    """The Session of one rank, seen from the watcher."""

    def __init__(self, every: int = 100, enabled: bool | None = None) -> None:
        """`enabled` None: only when torchrun launched this process among several
        (WORLD_SIZE > 1); otherwise nothing is installed and every call is a no-op."""
        from gradscope.distributed.session import Session

        self.enabled = launched_world() > 1 if enabled is None else enabled
        self.session: Session | None = Session.start(every) if self.enabled else None
        self.error: BaseException | None = None
        self.timeout: Exception | None = None
        self.watcher: Any = None
        self._destroy: Any = None

    def bind(self, watcher: Any) -> None:
        """Inside the entered Watcher: its Recorder gets the finaliser, and its pending
        steps are read back before the script destroys its process group (the finaliser
        may need the group)."""
        import torch.distributed as dist

        if not self.enabled:
            return
        self.watcher = watcher
        watcher.recorder.finalise = self.finalise
        add = watcher.recorder.add

        def add_step(step: Any) -> None:
            if callable(getattr(step.grad_norm, "to_local", None)):
                # FSDP2's clip_grad_norm_ returns a DTensor: drop it, and the recorder sums
                # the finalised (global) per-parameter squares instead, with no collective
                step.grad_norm = None
            add(step)

        watcher.recorder.add = add_step
        self._destroy = dist.destroy_process_group
        dist.destroy_process_group = self._before_destroy

    def _before_destroy(self, group: Any = None) -> None:
        if group is None and self.watcher is not None and not self._crashed():
            self.watcher.recorder.flush()
        self._destroy(group)

    def close(self) -> None:
        """Remove what bind() and the Session installed."""
        import torch.distributed as dist

        if self._destroy is not None and dist.destroy_process_group == self._before_destroy:
            dist.destroy_process_group = self._destroy
        self._destroy = None
        if self.session is not None:
            self.session.close()

    def _params(self) -> list[Any]:
        if self.watcher is None:
            return []
        return list(self.watcher.interceptor.tracked.params)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Around the script: note how it ended, so no collective follows a crash."""
        try:
            yield
        except BaseException as exc:
            from gradscope.watcher.intercept import StopWatching

            if not isinstance(exc, StopWatching):  # --steps reached: every rank stops alike
                self.error = exc
            raise

    def _crashed(self) -> bool:
        exc = self.error
        if exc is None:
            return False
        return not (isinstance(exc, SystemExit) and exc.code in (0, None))

    def finalise(self, squares: torch.Tensor) -> torch.Tensor:
        """[rows, params] squared norms of this rank -> of the full tensors.

        The rows are the read-back's gradient norms and the update and weight norms of
        its sampled steps (recorder.py). Sharded (FSDP2) parameters' squares are summed
        over ranks in one all-reduce of the whole matrix; replicated ones (DDP) are
        already the synchronised gradient's (and every replica's weights).
        """
        import torch
        import torch.distributed as dist

        from gradscope.distributed import context
        from gradscope.distributed.norms import is_sharded, local

        squares = local(squares)
        session = self.session
        if session is None or self._crashed() or self.timeout is not None:
            return squares
        if not dist.is_initialized():
            return squares
        width = squares.shape[-1]
        sharded = [is_sharded(p) for p in self._params()[:width]]
        sharded += [False] * (width - len(sharded))
        if not any(sharded):
            return squares
        rank = session.rank or context.current(session.timeout_s)
        if rank is None:
            return squares
        mask = torch.tensor(sharded, dtype=torch.bool, device=squares.device)
        present = squares >= 0
        try:
            summed = rank.all_reduce(torch.where(mask & present, squares, 0.0), "gradient norms")
        except context.RankTimeout as exc:
            self.timeout = exc
            raise
        return torch.where(mask & present, summed.to(squares.device), squares)

    def conclude(self, report: WatchReport, settings: Settings) -> WatchReport:
        """The watch report with the cross-rank findings; collectives only after a clean end."""
        from gradscope.distributed.context import RankTimeout

        session = self.session
        if session is None:
            return report
        if isinstance(self.error, RankTimeout) or self.timeout is not None:
            self.close()
            raise RankTimedOut(str(self.error if self.timeout is None else self.timeout))
        if self._crashed():
            assert self.error is not None
            findings = session.explain(self.error)
            self.close()
            if findings and not session.is_main:
                # rank 0 may be stuck in a collective: this rank's explanation is the error
                for f in findings:
                    _say_error(f"rank {launched_rank()}: {f.rule} {f.subject}: {f.message}")
            return _merged(report, findings, (), settings)
        try:
            dist = session.finish()
        except RankTimeout as exc:
            raise RankTimedOut(str(exc)) from None
        finally:
            self.close()
        if dist is None:
            return report
        from gradscope.distributed.merge import render_text

        summary = render_text(replace(dist, findings=[])).rstrip("\n").splitlines()
        summary = [line for line in summary if line != "no distributed findings"]
        summary.append("per step: loss of rank 0's own batch, norms of the synced gradients")
        merged = _merged(report, dist.findings, tuple(summary), settings)
        return replace(merged, distributed=dist.summary())


def _merged(
    report: WatchReport, extra: list[Any], notes: tuple[str, ...], settings: Settings
) -> WatchReport:
    from gradscope.findings import apply_settings

    findings = report.findings + apply_settings(list(extra), settings)
    findings.sort(key=lambda f: (-f.severity, f.rule))
    run = replace(report.run, notes=report.run.notes + notes) if notes else report.run
    return replace(report, run=run, findings=findings)


def _say_error(line: str) -> None:
    import sys

    sys.stderr.write(f"gradscope: {line}\n")


@contextlib.contextmanager
def quiet_unless_main() -> Iterator[None]:
    """gradscope's own stdout goes to devnull on ranks other than 0 (errors still show)."""
    if is_main_process():
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield
