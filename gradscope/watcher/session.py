"""`Watcher`: install the interception, record every step, remove it all, build the report.

Used as a context manager by the Python API (`with gradscope.watch() as w: train()`)
and by the script runner. Whatever ends the block (normal exit, --steps reached,
an exception, Ctrl-C), the hooks and wrappers are removed and the steps recorded
so far are read back into `w.run` and `w.report`.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gradscope.autograd_walk import TIMES_ZERO
from gradscope.config import Settings
from gradscope.errors import (
    GradscopeError,
    Terminated,
    UserCodeError,
    is_own_file,
)
from gradscope.rules.range_test import with_range_test_note
from gradscope.rules.watch import judge  # the engine calls the judge, once
from gradscope.steps.records import MANUAL, ParamInfo, StepRecord, WatchRun
from gradscope.watcher import resume, schedules
from gradscope.watcher.faults import fault_of, passing, record
from gradscope.watcher.listeners import STEP_LISTENERS
from gradscope.watcher.report import WatchReport
from gradscope.watcher.step_log import StepLog

if TYPE_CHECKING:
    from gradscope.watcher.state import WatchState

# the patches, recorder and state (which load torch) are imported in functions:
# `gradscope --help` must not load them


class Watcher:
    """Watch every optimizer step run inside the `with` block."""

    def __init__(
        self,
        label: str = "watch",
        settings: Settings | None = None,
        steps: int | None = None,
        log: str | None = None,
        update_every: int = 25,
        flush_every: int = 10,
        argv: tuple[str, ...] | None = None,
        batch_size: int | None = None,
    ) -> None:
        self.label = label
        self.batch_size = batch_size
        """Samples per micro-batch, as stated (the noise scale's unit); None: seen."""
        self.argv = argv
        self.settings = settings or Settings()
        self.steps = steps
        self.log_path = log
        self.update_every = update_every
        self.flush_every = flush_every
        self.run: WatchRun | None = None
        self.report: WatchReport | None = None
        self.resume: Any = None
        """A `resume.Resume` to continue (a host's checkpoint), set before the block."""
        self._started = 0.0

    def __enter__(self) -> Watcher:
        from gradscope.watcher import patches
        from gradscope.watcher.recorder import Recorder
        from gradscope.watcher.state import WatchState

        self._pid = os.getpid()
        self._log = StepLog(self.log_path) if self.log_path else None
        self.recorder = Recorder(self.flush_every, on_records=self._logged)
        self.state = WatchState(self.recorder, self.update_every, self.steps, self.batch_size)
        resume.apply(self.resume, self.state, self.recorder)
        self._started = time.perf_counter()
        self._patches = ExitStack()
        self._patches.enter_context(patches.intercepting(self.state))
        return self

    def _logged(self, records: list[StepRecord]) -> None:
        if os.getpid() != self._pid:  # a child the script forked: the log is the parent's
            return
        if self._log is not None:
            tracked = self.state.tracked
            self._log.write(records, tracked.names, tracked.params)
        for listener in STEP_LISTENERS:
            listener(records, self.state.tracked.names)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        from gradscope.watcher import manual, nan_probe
        from gradscope.watcher.state import StopWatching

        notes = []
        try:
            manual.finish(self.state)  # an update by hand after the last backward
        except Exception as check_error:  # e.g. the device failed with the script
            notes.append(
                f"the last update by hand could not be checked: "
                f"{type(check_error).__name__}: {check_error}"
            )
        self._patches.close()
        try:
            self.recorder.flush()
        except Exception as flush_error:  # e.g. the device failed with the script
            notes.append(
                f"the last {len(self.recorder.pending)} steps could not be read back: "
                f"{type(flush_error).__name__}: {flush_error}"
            )
        try:
            nan_probe.finish(self.state.probe, self.state)
        except Exception as probe_error:  # e.g. the device failed with the script
            notes.append(f"the weights could not be read for NaN: {probe_error}")
        status, error = _status(exc, StopWatching, self.state.freed_by_grad)
        if status == "crashed" and escaped(exc):  # a hook's failure no guard caught
            error = f"gradscope failed in its own code: {error}"
            fault = fault_of("a hook", self.state.steps + 1, exc, None, True)  # type: ignore[arg-type]
            record(self.state, replace(fault, ended=True))
        if status == "completed" and self.state.stopped:
            status = "stopped"  # --steps reached in another thread; the script ran on
        notes = [*self.state.notes, *notes]
        self.run = self._build(status, error, tuple(notes))
        if status == "crashed" and exc is not None:
            trace = UserCodeError("the script", exc).user_traceback()
            self.run = replace(self.run, traceback=trace)
        self.run = with_range_test_note(self.run)

        findings = None
        try:
            findings = judge(self.run, self.settings)
        finally:
            self._end_log(findings)
        self.report = WatchReport.of(self.run, findings, self.settings, tuple(self.state.faults))
        return isinstance(exc, StopWatching)

    def so_far(self) -> WatchRun:
        """The run as read back so far, still running: what a host judges as it goes."""
        return self._build("running", None, tuple(self.state.notes))

    def _end_log(self, findings: list[Any] | None) -> None:
        """The --log's last line, the findings (a precursor's lead among them), then the
        file closed; a write that failed is a note and an unwritten file of the run."""
        if self._log is None:
            return
        self._log.end(findings if os.getpid() == self._pid else None)
        if self._log.failure and self.run is not None:
            failure = self._log.failure
            self.run = replace(self.run, notes=(*self.run.notes, failure), unwritten=(failure,))

    def _params(self, ended_early: bool) -> tuple[ParamInfo, ...]:
        """Each tracked tensor: its optimizer and group, its first weight norm, where it
        sits in the model."""
        from gradscope.watcher import replaced, resets
        from gradscope.watcher.discover import read_out_layers

        icp = self.state
        holding = _holding(icp)
        owned = {id(p) for o in holding for g in o.param_groups for p in g["params"]}
        owned.update(id(icp.tracked.params[i]) for i in icp.manual.updated)
        groups = _groups(holding)
        idle = resets.idle_holders(icp, owned, ended_early)
        first = [] if icp.first_weights is None else icp.first_weights.tolist()
        read_outs = read_out_layers(icp.tracked.roots)
        return tuple(
            ParamInfo(
                name,
                tuple(p.shape),
                bool(p.requires_grad),
                id(p) in owned,
                groups.get(id(p), (None, None))[0],
                groups.get(id(p), (None, None))[1],
                first[i] if i < len(first) and first[i] >= 0 else None,
                in_model=i in icp.tracked.owners or not icp.tracked.roots,
                replaced_after=icp.replaced_after.get(i),
                past_read_out=read_outs.get(icp.tracked.owners.get(i, (-1, ""))),
                last_norm=_last_norm(p) if _copy_like(p, owned) else None,
                dtype=str(p.dtype).removeprefix("torch."),
                one_step=i in icp.manual.one_step,
                stepped_by_hook=bool(getattr(p, "_post_accumulate_grad_hooks", None)),
                idle_optimizer=idle.get(id(p), resets.NOT_IDLE)[0],
                idle_zeroed=idle.get(id(p), resets.NOT_IDLE)[1],
                idle_resets=idle.get(id(p), resets.NOT_IDLE)[2],
                idle_cleared=id(p) in icp.cleared_unstepped,
                model=icp.tracked.owners.get(i, (None, ""))[0],
                plain_attribute=i in icp.tracked.attributes,
                assigned_over=replaced.assigned_in_place_of(icp, p, owned),
                **_graph_facts(icp, i, p),
            )
            for i, (name, p) in enumerate(zip(icp.tracked.names, icp.tracked.params, strict=True))
        )

    def _build(self, status: str, error: str | None, notes: tuple[str, ...]) -> WatchRun:
        from gradscope.watcher import run_facts
        from gradscope.watcher.manual_search import ManualUpdates

        icp = self.state
        return WatchRun(
            label=self.label,
            params=self._params(status in ("crashed", "interrupted", "terminated")),
            steps=self.recorder.records,  # padded to len(params) as they are read
            status=status,
            duration_s=time.perf_counter() - self._started,
            error=error,
            optimizers=tuple(
                MANUAL if isinstance(o, ManualUpdates) else type(o).__name__ for o in icp.optimizers
            ),
            members=tuple(icp.tracked.members(o) for o in icp.optimizers),
            backward_calls=icp.backward_total,
            update_every=self.update_every,
            notes=notes,
            loss_kinds=tuple(icp.of(o).loss_kind for o in icp.optimizers),
            settings=icp.settings.of(len(icp.optimizers)),
            state_loaded=icp.settings.loaded_of(len(icp.optimizers)),
            sites=dict(icp.sites),
            schedulers=schedules.infos(icp),
            argv=self.argv,
            backward_nan=icp.probe.origin,
            weights_nan=icp.probe.weights,
            state_facts=run_facts.read(icp, self.recorder.records),
            batch_read=tuple(icp.noise.reads),
            unused_clips=tuple(icp.unused_clips.values()),
            carried_graph=icp.graph_marks.found,
            growing_graph=icp.graph_marks.growing,
            grad_off_at=icp.grad_off_at,
            grad_off_derivative=icp.grad_off_derivative,
            derivative_cut_at=tuple(icp.derivative_cut_at),
            derivative_moved=icp.derivatives.moved,
            hook_again=icp.hooks_again.found,
            graphless_at=icp.graphless_at,
            graphless_derivative=icp.graphless_derivative,
            graphless_checkpoint=icp.graphless_checkpoint,
            uncreated_at=icp.uncreated_at,
            uncreated_direct=icp.uncreated.direct,
        )


def _holding(icp: Any) -> list[Any]:
    """The known optimizers that hold their parameters for the verdicts: not one found at a
    clip whose zero_grad() ran and whose step() never did (an auxiliary optimizer whose
    step the script left out): its parameters are told as that idle optimizer's (GS411),
    as they are where no clip found it."""
    return [
        o
        for o in icp.known
        if id(o) not in icp.zeroed or any(o is stepped for stepped in icp.optimizers)
    ]


def _groups(optimizers: Any) -> dict[int, tuple[float | None, int]]:
    """Each optimized tensor's learning rate and param group, by id."""
    return {
        id(p): (_lr(g), k)
        for o in optimizers
        for k, g in enumerate(o.param_groups)
        for p in g["params"]
    }


def _copy_like(p: Any, owned: set[int]) -> bool:
    """A parameter whose end norm is read: in no optimizer, frozen, or left without a
    gradient at the end (a teacher handed to the optimizer that its EMA moves)."""
    return id(p) not in owned or not p.requires_grad or p.grad is None


def _last_norm(p: Any) -> float | None:
    """A parameter in no optimizer: its norm at the end, one read for the run, so GS411 can
    say whether a copy changed its values; None where it cannot be read (a failed device).
    Measured as the first norm was (a complex tensor's imaginary part counts too)."""
    from gradscope.watcher.measure import norms

    try:
        return float(norms([p])[0])
    except Exception:
        return None


def escaped(exc: BaseException | None) -> bool:
    """An exception raised by gradscope's own code (not by what it called, not a rank's
    timeout, not an error the user can fix) that reached the script."""
    if not isinstance(exc, Exception) or isinstance(exc, GradscopeError) or passing(exc):
        return False
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and is_own_file(tb.tb_frame.f_code.co_filename)


def _status(
    exc: BaseException | None, stop: type[BaseException], freed_by_grad: str = ""
) -> tuple[str, str | None]:
    """The run's status and the script's error; `freed_by_grad`: why a backward failed on
    a graph an autograd.grad call without retain_graph freed, said after the error."""
    if exc is None or isinstance(exc, stop):
        return ("completed" if exc is None else "stopped"), None
    if isinstance(exc, Terminated):
        return "terminated", None
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", None
    if isinstance(exc, SystemExit):
        if exc.code in (0, None):
            return "completed", None
        return "crashed", f"the script called sys.exit({exc.code!r})"
    detail = (str(exc).strip().splitlines() or [""])[0]
    return "crashed", f"{type(exc).__name__}: {detail}".rstrip(": ") + freed_by_grad


def _lr(group: dict[str, Any]) -> float | None:
    """The group's lr as a number. A learned lr (hypergradient descent through a
    differentiable optimizer) is a tensor that requires grad: read detached, or torch
    warns on the user's stderr."""
    lr = group.get("lr")
    detach = getattr(lr, "detach", None)
    try:
        return float(detach() if callable(detach) else lr) if lr is not None else None
    except (TypeError, ValueError, RuntimeError):
        return None


def _library_holder(icp: WatchState, i: int) -> str:
    """The installed library's class (torch's excepted) holding tracked tensor i; "": the
    script's own, torch's or none found."""
    from gradscope.watcher.frozen_norms import holder_of
    from gradscope.watcher.no_grad_owners import library_class

    module = holder_of(icp.tracked, i)
    return (library_class(type(module)) or "") if module is not None else ""


def _graph_facts(icp: WatchState, i: int, p: Any) -> dict[str, Any]:
    """What the graph reads and the no_grad owners found of tracked tensor i (ParamInfo's
    fields of the same names)."""
    from gradscope.watcher.frozen_norms import optimised_input

    return {
        "differentiated": icp.grad_inputs.holds(p),
        "derivative_offset": icp.derivatives.offset(p),
        "plain_derivative": icp.plain_derivatives.holds(p),
        "logits_table": icp.logit_tables.holds(p),
        "flat_op": (flat := icp.flat_ops.op_above(p)),
        "library_holder": _library_holder(icp, i) if flat == TIMES_ZERO else "",
        "clamped_off": icp.clamped_terms.holds(p),
        "below_floor": icp.clamped_terms.below_floor(p),
        "sampled_grid": icp.sampled_grids.holds(p),
        "looked_up": icp.sampled_grids.looks_up(p),
        "optimised_input": optimised_input(icp.tracked, i, icp.frozen_norms),
        "no_grad_forwards": icp.eval_passes.owners.only_without(i),
        "no_grad_function": icp.eval_passes.owners.function_around(i),
        "rerun_by": icp.eval_passes.owners.rerun_by(i),
        "uncalled_in": icp.eval_passes.owners.uncalled_in(i),
        "dropped_in": icp.eval_passes.dropped.dropped_in(i),
        "read_as_number": icp.eval_passes.owners.read_as_number_in(i),
    }
