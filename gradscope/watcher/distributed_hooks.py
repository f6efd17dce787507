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
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradscope.distributed.stopping import TermNote
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
        if self.enabled and launched_world() > 1:
            global _term
            _term = TermNote().install()
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
        if self.session is not None:  # the steps the rank took, whatever wraps the model
            self.session.step_counter = lambda: int(watcher.state.steps)
        watcher.recorder.finalise = self.finalise
        noise = getattr(watcher.state, "noise", None)
        if noise is not None:  # the reduction rewrites `.grad` within the backward call
            noise.fresh_ok = False
            noise.ranks = self._replicas
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
        return list(self.watcher.state.tracked.params)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Around the script: note how it ended, so no collective follows a crash."""
        try:
            yield
        except BaseException as exc:
            from gradscope.watcher.state import StopWatching

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
        from gradscope.distributed.context import RankTimeout
        from gradscope.errors import Terminated

        session = self.session
        if session is None:
            return report
        store = session.store
        global _farewell
        _farewell = store
        if isinstance(self.error, Terminated):
            self.close()  # no collective: torchrun is stopping every rank
            if not session.is_main:
                return report
            return _died_elsewhere(report, store, settings, TERM_WAIT_S) or report
        if isinstance(self.error, RankTimeout) or self.timeout is not None:
            self.close()
            # a gathering failed: a rank that died (and said so) is the reason
            died = _died_elsewhere(report, store, settings) if session.is_main else None
            if died is None:
                raise RankTimedOut(str(self.error if self.timeout is None else self.timeout))
            return died
        if self._crashed():
            assert self.error is not None
            findings = session.explain(self.error)
            self.close()
            group = session.rank or session.group
            backend = group.backend if group is not None else None
            peers = CrashMeeting(store, launched_rank(), launched_world(), backend)
            peers.publish(report.failure() or "the script failed", findings)
            notes: tuple[str, ...] = ()
            if session.is_main:
                extra, notes = peers.collect()
                findings = findings + [
                    f
                    for f in extra
                    if (f.rule, f.subject) not in {(g.rule, g.subject) for g in findings}
                ]
            else:
                # rank 0 may never write a report: this rank's explanation is on stderr too
                for f in findings:
                    _say_error(f"rank {launched_rank()}: {f.rule} {f.subject}: {f.message}")
            global _meeting
            _meeting = peers
            return _merged(report, findings, notes, settings)
        try:
            dist = session.finish()
        except RankTimeout as exc:
            died = _died_elsewhere(report, store, settings) if session.is_main else None
            if died is None:
                raise RankTimedOut(str(exc)) from None
            return died
        finally:
            self.close()
        if dist is None:
            return report
        from gradscope.distributed.merge import render_text

        summary = render_text(replace(dist, findings=[])).rstrip("\n").splitlines()
        summary = [line for line in summary if line != "no distributed findings"]
        summary.append("per step: loss of rank 0's own batch, norms of the synced gradients")
        if session.layout == "FSDP2":
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

PEER_WAIT_S = 5.0
"""How long rank 0 waits for the other ranks' crash records."""
REPORT_WAIT_S = 10.0
"""How long a dying rank waits for rank 0 to have written the merged report."""
VANISHED_POLL_S = 0.5
"""How often rank 0, waiting for crash records, looks for ranks that vanished."""
TERM_WAIT_S = 1.0
"""How long a terminated rank 0 looks for the record of a rank that failed: one that
failed left it before it exited, and torchrun stops rank 0 only after that."""


def rank_exit_code(code: int) -> int:
    """The exit code of this process at the end of `gradscope watch`. Rank 0's is the
    run's (it reports every rank's findings and errors). Another rank exits 0 where a
    failure would only make torchrun stop rank 0 before its report: findings (rank 0
    reports them) and, in a gloo group, its own crash (rank 0 merges it, see
    CrashMeeting). Where it keeps a failing code, it first waits (at most REPORT_WAIT_S)
    for rank 0 to say its report is written."""
    from gradscope.errors import ExitCode

    global _meeting, _term, _farewell
    meeting, _meeting = _meeting, None
    if _term is not None:
        _term.remove()
        _term = None
    if _farewell is not None:
        from gradscope.distributed import peers

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
        import json

        record = {"failure": failure, "findings": [f.to_dict() for f in findings]}
        self._set(f"gradscope/died/{self.rank}", json.dumps(record))

    def collect(self, wait_s: float = PEER_WAIT_S) -> tuple[list[Any], tuple[str, ...]]:
        """Rank 0: the findings of the other ranks that died, each marked with its rank,
        and one note per such rank naming its error."""
        found = self.records(wait_s)
        return _from_records(found)

    def records(self, wait_s: float = PEER_WAIT_S) -> dict[int, dict[str, Any]]:
        """The other ranks' crash records, and a stand-in for each rank that vanished
        (gradscope.distributed.peers), waiting at most `wait_s` for the others."""
        import json
        import math
        import time

        from gradscope.distributed import peers

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
        import time

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
    findings, notes = _from_records(found)
    error = f"the script died on rank {first}: {found[first].get('failure')}"
    if report.run.status == "terminated":
        notes += (
            f"torchrun stopped rank 0 (SIGTERM) after rank {first} failed: "
            "the report covers the steps before",
        )
    run = replace(report.run, status="crashed", error=error, traceback=None)
    _meeting = meeting
    return _merged(replace(report, run=run, where=None), findings, notes, settings)


def _check(store: Any, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:
        return False


def _from_records(found: dict[int, dict[str, Any]]) -> tuple[list[Any], tuple[str, ...]]:
    from gradscope.findings import RULES
    from gradscope.fmt import printable

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


def _merged(
    report: WatchReport, extra: list[Any], notes: tuple[str, ...], settings: Settings
) -> WatchReport:
    from gradscope.findings import split_ignored

    active, ignored = split_ignored(settings.judged(list(extra)))
    findings = sorted(report.findings + active, key=lambda f: (-f.severity, f.rule))
    run = replace(report.run, notes=report.run.notes + notes) if notes else report.run
    return replace(report, run=run, findings=findings, ignored=report.ignored + ignored)


def _say_error(line: str) -> None:
    import sys

    from gradscope.fmt import printable

    sys.stderr.write(f"gradscope: {printable(line)}\n")


@contextlib.contextmanager
def quiet_unless_main() -> Iterator[None]:
    """gradscope's own stdout goes to devnull on ranks other than 0 (errors still show)."""
    if is_main_process():
        yield
        return
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        yield
