"""`gradscope watch` under torchrun: the one place the watcher meets gradscope.distributed.

`DistributedWatch` starts a distributed `Session` before the script when torchrun
launched several processes (WORLD_SIZE > 1; in any other run it installs nothing), gives
the Recorder a finaliser that turns FSDP2 shard norms (gradients, updates, weights) into
global ones (one all-reduce per read-back, on every rank), and afterwards merges the
Session's cross-rank findings into the watch report. When the script dies it explains
DDP's reduction error without any collective (the other ranks may be stuck), and the
ranks meet in the group's key-value store instead: every rank that died leaves its error
and findings there and rank 0 merges them into its report. So that torchrun does not
stop rank 0 before that report, a dying rank then exits 0 (gloo) or waits briefly for
rank 0 (see `rank_exit_code`). Only rank 0 writes files and stdout.

When torchrun stops the run (SIGTERM: another rank failed, or the launch was stopped
from outside), rank 0 still reports the steps so far: a SIGTERM during the script ends
it as `terminated`, one after it is only noted (gradscope.distributed.stopping), and a
rank that failed or vanished (gradscope.distributed.peers) makes the run `crashed`
there, named, exit 2; with no rank to blame the run stays `terminated`, exit 143.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradscope.distributed import peers
from gradscope.distributed.merge import render_text
from gradscope.distributed.stopping import TermNote
from gradscope.errors import ExitCode, GradscopeError, Terminated
from gradscope.findings import split_ignored
from gradscope.fmt import printable
from gradscope.watcher.crash_meeting import PEER_WAIT_S, CrashMeeting, from_records

if TYPE_CHECKING:  # the rest loads torch: `gradscope watch --nproc-per-node` must not
    import torch

    from gradscope.config import Settings
    from gradscope.distributed.merge import DistReport
    from gradscope.distributed.session import Session
    from gradscope.watcher.recorder import PendingStep
    from gradscope.watcher.report import WatchReport

# torch and the distributed modules (which load it) are imported in functions:
# `gradscope --help` must not load them


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
        if self.enabled and launched_world() > 1:
            global _term
            _term = TermNote().install()
        self.error: BaseException | None = None
        self.timeout: Exception | None = None
        self.watcher: Any = None

    def bind(self, watcher: Any) -> None:
        """Inside the entered Watcher: its Recorder gets the finaliser and the step hook,
        and its pending steps are read back before the script destroys its process
        group (the finaliser may need the group): the Session's hook before that."""
        if not self.enabled:
            return
        self.watcher = watcher
        watcher.recorder.finalisers.append(self.finalise)
        watcher.recorder.on_add.append(_no_sharded_total)
        noise = getattr(watcher.state, "noise", None)
        if noise is not None:  # the reduction rewrites `.grad` within the backward call
            noise.fresh_ok = False
            noise.ranks = self._replicas
        if self.session is not None:  # the steps the rank took, whatever wraps the model
            self.session.step_counter = lambda: int(watcher.state.steps)
            self.session.before_destroy.append(self._flush)

    def _flush(self) -> None:
        """Before the script destroys its process group: a failure of gradscope's own is
        the watch's (switched off, exit 3), never the script's."""
        from gradscope.watcher.guard import shielded  # loads torch

        watcher = self.watcher
        if watcher is not None and not self._crashed():
            part = "the read-back before destroy_process_group()"
            shielded(watcher.state, part, watcher.recorder.flush)

    def close(self) -> None:
        """Remove what bind() and the Session installed."""
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            _drop(watcher.recorder.finalisers, self.finalise)
            _drop(watcher.recorder.on_add, _no_sharded_total)
        if self.session is not None:
            _drop(self.session.before_destroy, self._flush)
            self.session.close()

    def _params(self) -> list[Any]:
        if self.watcher is None:
            return []
        return list(self.watcher.state.tracked.params)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Around the script: note how it ended, so no collective follows a crash."""
        try:
            yield
        except BaseException as exc:
            from gradscope.watcher.state import StopWatching  # loads torch

            if not isinstance(exc, StopWatching):  # --steps reached: every rank stops alike
                self.error = exc
            raise
        finally:
            if _term is not None:
                _term.settle()  # a SIGTERM from now on must not cut rank 0's report short

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

    def _replicas(self) -> int:
        """Ranks whose gradients DDP averages (1 until a DDP model is found)."""
        session = self.session
        if session is None or session.layout != "DDP" or session.rank is None:
            return 1
        return int(session.rank.world)

    def conclude(self, report: WatchReport, settings: Settings) -> WatchReport:
        """The watch report with the cross-rank findings; collectives only after a clean end."""
        from gradscope.distributed.context import RankTimeout  # loads torch

        session = self.session
        if session is None:
            return report
        global _farewell
        _farewell = session.store
        if isinstance(self.error, Terminated):
            self.close()  # no collective: torchrun is stopping every rank
            if not session.is_main:
                return report
            return _died_elsewhere(report, session.store, settings, TERM_WAIT_S) or report
        if isinstance(self.error, RankTimeout) or self.timeout is not None:
            self.close()
            return self._timed_out(report, session, settings, self.timeout or self.error)
        if self._crashed():
            return self._crash_report(report, session, settings)
        try:
            dist = session.finish()
        except RankTimeout as exc:
            return self._timed_out(report, session, settings, exc)
        finally:
            self.close()
        if dist is None:
            return report
        return _with_summary(report, dist, session.layout, settings)

    def _timed_out(
        self, report: WatchReport, session: Session, settings: Settings, exc: Any
    ) -> WatchReport:
        """A gathering failed: a rank that died (and said so) is the reason."""
        died = _died_elsewhere(report, session.store, settings) if session.is_main else None
        if died is None:
            raise RankTimedOut(str(exc)) from None
        return died

    def _crash_report(
        self, report: WatchReport, session: Session, settings: Settings
    ) -> WatchReport:
        """The script died on this rank: DDP's error explained with no collective, and
        the ranks that died meet in the store (crash_meeting.py)."""
        assert self.error is not None
        findings = session.explain(self.error)
        store = session.store
        self.close()
        group = session.rank or session.group
        backend = group.backend if group is not None else None
        meeting = CrashMeeting(store, launched_rank(), launched_world(), backend)
        meeting.publish(report.failure() or "the script failed", findings)
        notes: tuple[str, ...] = ()
        if session.is_main:
            extra, notes = meeting.collect()
            seen = {(g.rule, g.subject) for g in findings}
            findings = findings + [f for f in extra if (f.rule, f.subject) not in seen]
        else:
            # rank 0 may never write a report: this rank's explanation is on stderr too
            for f in findings:
                _say_error(f"rank {launched_rank()}: {f.rule} {f.subject}: {f.message}")
        global _meeting
        _meeting = meeting
        return _merged(report, findings, notes, settings)


def _no_sharded_total(step: PendingStep) -> None:
    """FSDP2's clip_grad_norm_ returns a DTensor: drop it, and the recorder sums the
    finalised (global) per-parameter squares instead, with no collective."""
    if callable(getattr(step.grad_norm, "to_local", None)):
        step.grad_norm = None


def _drop(hooks: list[Any], hook: Any) -> None:
    """Take `hook` off a list of hooks (once: it was appended once)."""
    for i, h in enumerate(hooks):
        if h == hook:
            del hooks[i]
            return


def _with_summary(
    report: WatchReport, dist: DistReport, layout: str, settings: Settings
) -> WatchReport:
    """A clean end: the cross-rank findings, and a summary of the ranks as notes."""
    summary = render_text(replace(dist, findings=[])).rstrip("\n").splitlines()
    summary = [line for line in summary if line != "no distributed findings"]
    summary.append("per step: loss of rank 0's own batch, norms of the synced gradients")
    if layout == "FSDP2":
        summary.append(
            "noise scale: not measured under FSDP2 (each rank's gradient before the "
            "reduce-scatter is not its parameters' own)"
        )
    merged = _merged(report, dist.findings, tuple(summary), settings)
    return replace(merged, distributed=dist.summary())


_meeting: CrashMeeting | None = None
_term: TermNote | None = None
_farewell: Any = None
"""The store this rank says goodbye in when its watch ends (gradscope.distributed.peers)."""

TERM_WAIT_S = 1.0
"""How long a terminated rank 0 looks for the record of a rank that failed: one that
failed left it before it exited, and torchrun stops rank 0 only after that."""


def rank_exit_code(code: int) -> int:
    """The exit code of this process at the end of `gradscope watch`. Rank 0's is the
    run's (it reports every rank's findings and errors). Another rank exits 0 where a
    failure would only make torchrun stop rank 0 before its report: findings (rank 0
    reports them) and, in a gloo group, its own crash (rank 0 merges it, see
    CrashMeeting). Where it keeps a failing code, it first waits (crash_meeting.REPORT_WAIT_S)
    for rank 0 to say its report is written."""
    global _meeting, _term, _farewell
    meeting, _meeting = _meeting, None
    if _term is not None:
        _term.remove()
        _term = None
    if _farewell is not None:
        peers.farewell(_farewell, launched_rank(), code)
        _farewell = None
    if is_main_process():
        if meeting is not None:
            meeting.report_written()
        return code
    if code == ExitCode.FINDINGS:
        return ExitCode.OK
    if meeting is not None and code == ExitCode.ERROR:
        if meeting.hands_over():
            return ExitCode.OK
        meeting.report_written()
    return code


def _died_elsewhere(
    report: WatchReport, store: Any, settings: Settings, wait_s: float = PEER_WAIT_S
) -> WatchReport | None:
    """Rank 0's script ended (normally, or stopped by torchrun's SIGTERM), but another rank
    died: the run crashed there. Its report, with that rank's error and findings; None
    when no rank said it died or vanished."""
    global _meeting
    meeting = CrashMeeting(store, launched_rank(), launched_world())
    found = meeting.records(wait_s)
    if not found:
        return None
    first = min(found)
    findings, notes = from_records(found)
    error = f"the script died on rank {first}: {found[first].get('failure')}"
    if report.run.status == "terminated":
        notes += (
            f"torchrun stopped rank 0 (SIGTERM) after rank {first} failed: "
            "the report covers the steps before",
        )
    run = replace(report.run, status="crashed", error=error, traceback=None)
    _meeting = meeting
    return _merged(replace(report, run=run, where=None), findings, notes, settings)


def _merged(
    report: WatchReport, extra: list[Any], notes: tuple[str, ...], settings: Settings
) -> WatchReport:
    active, ignored = split_ignored(settings.judged(list(extra)))
    findings = sorted(report.findings + active, key=lambda f: (-f.severity, f.rule))
    run = replace(report.run, notes=report.run.notes + notes) if notes else report.run
    return replace(report, run=run, findings=findings, ignored=report.ignored + ignored)


def _say_error(line: str) -> None:
    sys.stderr.write(f"gradscope: {printable(line)}\n")


@contextlib.contextmanager
def quiet_unless_main() -> Iterator[None]:
    """gradscope's own stdout goes to devnull on ranks other than 0 (errors still show)."""
    if is_main_process():
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield
