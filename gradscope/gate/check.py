"""`gradscope check`: every configured target, one combined verdict.

Runs the `[[inspect]]` and `[[gradcheck]]` entries of the settings one after
another. A target that cannot run does not stop the others: it is recorded
as an error, and the combined exit code is then 2.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from multiprocessing import reduction
from typing import Any, Protocol

from gradscope.api import inspect_target
from gradscope.config import CheckEntry, Settings
from gradscope.errors import GradscopeError, UserCodeError
from gradscope.gradcheck.checker import options_for, warm_up
from gradscope.gradcheck.findings import check_entry
from gradscope.inspector.targets import file_of, split_spec
from gradscope.outcome import CheckReport, Outcome
from gradscope.watcher.check import run_entry


def resolve(entry: CheckEntry) -> str:
    """Relative file targets are relative to the config file that names them."""
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


def run_inspect(entry: CheckEntry, settings: Settings) -> Outcome:
    return _timed(
        "inspect", entry, lambda spec: inspect_target(spec, settings.for_entry(entry)).outcome()
    )


def run_gradcheck(entry: CheckEntry, settings: Settings) -> Outcome:
    return _timed("gradcheck", entry, lambda spec: check_entry(entry, spec, settings))


def run_watch(entry: CheckEntry, settings: Settings) -> Outcome:
    return run_entry(entry, settings)


class Progress(Protocol):
    def started(self, index: int, total: int, label: str) -> None: ...
    def finished(self, index: int, total: int, result: Outcome) -> None: ...


def _jobs(settings: Settings) -> list[tuple[Callable[..., Outcome], CheckEntry, str]]:
    if not settings.inspect and not settings.gradcheck and not settings.watch:
        raise GradscopeError(
            "nothing to check: add [[tool.gradscope.inspect]], "
            "[[tool.gradscope.gradcheck]] or [[tool.gradscope.watch]] entries to pyproject.toml, "
            "or pass "
            "--config FILE"
        )

    for entry in settings.gradcheck:  # shape, dtype, tensor, domain: wrong before any runs
        options_for(entry)
    jobs = [(run_inspect, e, "inspect") for e in settings.inspect]
    jobs += [(run_gradcheck, e, "gradcheck") for e in settings.gradcheck]
    jobs += [(run_watch, e, "watch") for e in settings.watch]
    return jobs


def run(settings: Settings, progress: Progress | None = None) -> CheckReport:
    """Every configured target in order, in this process, telling `progress` as each starts
    and finishes."""
    jobs = _jobs(settings)
    results = []
    for i, (job, entry, kind) in enumerate(jobs):
        if progress:
            progress.started(i, len(jobs), f"{kind} {entry.target}")
        results.append(job(entry, settings))
        if progress:
            progress.finished(i, len(jobs), results[-1])
    return CheckReport(results, settings.fail_on)


def run_isolated(settings: Settings, progress: Progress | None = None) -> CheckReport:
    """As `run`, but the targets run in a worker process, so a target that ends the process
    (os._exit, a crash in native code) fails itself only: its error is recorded and a new
    worker carries on with the next target. One extra process per run, plus one per target
    that killed its worker."""

    jobs = _jobs(settings)
    context = _context()
    environ = dict(os.environ)
    results: list[Outcome] = []
    while len(results) < len(jobs):
        start = len(results)
        receive, send = context.Pipe(duplex=False)
        streams = (_Fd(1), _Fd(2))
        worker = context.Process(
            target=_work, args=(settings, start, send, environ, streams), daemon=True
        )
        worker.start()
        send.close()
        try:
            results += _results(receive, jobs, progress)
        except KeyboardInterrupt:  # Ctrl-C: the worker ends quietly, the parent reports it
            worker.terminate()
            worker.join()
            raise
        worker.join()
        if len(results) < len(jobs):  # the worker died inside the target it was running
            _, entry, kind = jobs[len(results)]
            results.append(_died(kind, entry, worker.exitcode))
            if progress:
                progress.finished(len(results) - 1, len(jobs), results[-1])
    return CheckReport(results, settings.fail_on)


PRELOAD = ["torch", "torch._dynamo", "sympy", "gradscope.gate.check"]
"""What the fork server imports once: torch, the parts of it a first autograd.grad
imports (about a second), and the targets' runners."""


def _context() -> Any:
    """Workers forked from a fork server that has imported torch (the server never runs a
    target, and a worker is never a fork of this process, whose threads and state a target
    must not see); spawned where there is no fork server (Windows). The server lives as
    long as this process: each later run (the tests run many) starts in milliseconds."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def _results(receive: Any, jobs: list[Any], progress: Progress | None) -> list[Outcome]:
    """What one worker sends until it ends (having run its targets, or by dying)."""
    results: list[Outcome] = []
    try:
        while True:
            message = receive.recv()
            if message[0] == "started":
                index = message[1]
                if progress:
                    kind, entry = jobs[index][2], jobs[index][1]
                    progress.started(index, len(jobs), f"{kind} {entry.target}")
            else:
                results.append(message[2])
                if progress:
                    progress.finished(message[1], len(jobs), message[2])
    except EOFError:
        return results


class _Fd:
    """One of this process's file descriptors, duplicated into the worker as it starts."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _received, (reduction.DupFd(self.fd),)


def _received(duplicate: Any) -> int:
    return int(duplicate.detach())


def _work(
    settings: Settings, start: int, send: Any, environ: dict[str, str], streams: tuple[Any, ...]
) -> None:
    """The worker: run the targets from `start` on, sending each result as it is known.
    Ctrl-C reaches the whole process group: the parent alone answers it. The environment
    and stdout/stderr are the parent's now (a fork server's are those it started with,
    perhaps another command's; the working directory and sys.path come with the process)."""

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(environ)
    for target, fd in enumerate(streams, start=1):
        os.dup2(fd, target)
        os.close(fd)

    warm_up()  # torch's one-off lazy imports, not billed to the first target's time
    jobs = _jobs(settings)
    for index in range(start, len(jobs)):
        job, entry, _ = jobs[index]
        send.send(("started", index))
        send.send(("done", index, job(entry, settings)))
    send.close()


def _died(kind: str, entry: CheckEntry, exitcode: int | None) -> Outcome:
    how = (
        f"killed by signal {-exitcode}"
        if exitcode is not None and exitcode < 0
        else f"exit code {exitcode}"
    )
    return Outcome(
        kind,
        entry.target,
        could_not_run=f"the target ended gradscope's worker process ({how}): os._exit() or a "
        "crash in native code, while it ran",
        file=file_of(resolve(entry)),
    )
