"""`gradscope check`: every configured target, one combined verdict.

Runs the `[[inspect]]`, `[[gradcheck]]` and `[[watch]]` entries of the settings one
after another, each through the one runner it is given (the API: api/checking.py), timed
and labelled here. A target that cannot run does not stop the others: it is recorded as
an error, and the combined exit code is then 2.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Protocol

from gradscope.config import CheckEntry, Settings
from gradscope.errors import GradscopeError, UserCodeError
from gradscope.fmt import duration
from gradscope.gate import workers
from gradscope.inspector.targets import file_of, split_spec
from gradscope.outcome import CheckReport, Outcome


def resolve(entry: CheckEntry) -> str:
    """Relative file targets ([[watch]] scripts too) are relative to the config file that
    names them."""
    where, name = split_spec(entry.target)
    base = os.path.dirname(os.path.abspath(entry.source))
    if where.endswith(".py") and not os.path.isabs(where):
        candidate = os.path.relpath(os.path.join(base, where))
        return f"{candidate}:{name}" if name else candidate
    return entry.target


def _timed(kind: str, entry: CheckEntry, job: Callable[[str], Outcome]) -> Outcome:
    """Run `job(resolved_spec)`, labelled as the config names the target; a GradscopeError
    is why this target could not run."""
    spec = resolve(entry)
    start = time.perf_counter()
    try:
        try:
            outcome = job(spec)
        except (KeyboardInterrupt, Exception):
            raise
        except BaseException as exc:  # sys.exit in the user's code fails this target only
            raise UserCodeError("your code", exc) from exc
    except GradscopeError as exc:
        outcome = Outcome(kind, entry.target, could_not_run=str(exc))
    outcome.label, outcome.file = entry.target, file_of(spec)
    outcome.duration_s, outcome.detail = time.perf_counter() - start, None
    return outcome


Runner = Callable[[str, str, CheckEntry, Settings], Outcome]
"""How one entry runs: `runner(kind, spec, entry, settings)`, the command's API function
(api/checking.run_entry); here, below the API, the gate times it and labels it."""


def run_entry(runner: Runner, kind: str, entry: CheckEntry, settings: Settings) -> Outcome:
    """One entry of any kind, through the one runner."""
    return _timed(kind, entry, lambda spec: runner(kind, spec, entry, settings))


class Progress(Protocol):
    def started(self, index: int, total: int, label: str) -> None: ...
    def finished(self, index: int, total: int, result: Outcome) -> None: ...


def _jobs(settings: Settings) -> list[tuple[str, CheckEntry]]:
    if not settings.inspect and not settings.gradcheck and not settings.watch:
        raise GradscopeError(
            "nothing to check: add [[tool.gradscope.inspect]], "
            "[[tool.gradscope.gradcheck]] or [[tool.gradscope.watch]] entries to pyproject.toml, "
            "or pass "
            "--config FILE"
        )
    jobs = [("inspect", e) for e in settings.inspect]
    jobs += [("gradcheck", e) for e in settings.gradcheck]
    return jobs + [("watch", e) for e in settings.watch]


def run(settings: Settings, runner: Runner, progress: Progress | None = None) -> CheckReport:
    """Every configured target in order, in this process, telling `progress` as each starts
    and finishes."""
    jobs = _jobs(settings)
    results = []
    for i, (kind, entry) in enumerate(jobs):
        if progress:
            progress.started(i, len(jobs), f"{kind} {entry.target}")
        results.append(run_entry(runner, kind, entry, settings))
        if progress:
            progress.finished(i, len(jobs), results[-1])
    return CheckReport(results, settings.fail_on)


def run_isolated(
    settings: Settings, runner: Runner, progress: Progress | None = None
) -> CheckReport:
    """As `run`, but each target runs in a process of its own (gate/workers.py), forked
    from a fork server that imported torch once: nothing a target changes in its process
    reaches the next one, and a target that ends its process (os._exit, a signal, a crash
    in native code) fails itself only."""

    jobs = _jobs(settings)
    ctx = workers.context()
    environ = dict(os.environ)
    results: list[Outcome] = []
    for index, (kind, entry) in enumerate(jobs):
        if progress:
            progress.started(index, len(jobs), f"{kind} {entry.target}")
        result = workers.run_one(ctx, run_entry, (runner, kind, entry, settings), environ)
        results.append(_died(kind, entry, result) if isinstance(result, workers.Died) else result)
        if progress:
            progress.finished(index, len(jobs), results[-1])
    return CheckReport(results, settings.fail_on)


def _died(kind: str, entry: CheckEntry, death: workers.Died) -> Outcome:
    return Outcome(
        kind,
        entry.target,
        could_not_run=f"the target ended gradscope's worker process ({death.how()}) "
        f"{duration(death.seconds)} into its run: {death.cause()}",
        file=file_of(resolve(entry)),
        duration_s=death.seconds,
    )
