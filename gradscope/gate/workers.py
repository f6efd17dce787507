"""One process per target of `gradscope check`, forked from a fork server that imported
torch once.

A target changes the process it runs in (sys.modules, sys.path, the working directory,
os.environ, torch's global state, signal handlers, patches of torch); in a process of its
own none of that reaches the next target, and a target that ends its process (os._exit,
a signal, a crash in native code) ends only its own.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from multiprocessing import reduction
from multiprocessing.connection import wait
from typing import Any

from gradscope.gradcheck.target_checks import warm_up
from gradscope.outcome import Outcome

PRELOAD = [
    "__main__",
    "torch",
    "torch._dynamo",
    "sympy",
    "torch._decomp.decompositions_for_jvp",
    "gradscope.api.checking",
    "gradscope.inspector.probe",
    "gradscope.inspector.explain",
    "gradscope.inspector.script",
    "gradscope.gradcheck.stages",
    "gradscope.gradcheck.compared",
    "gradscope.gradcheck.diagnose",
    "gradscope.watcher.patches",
    "gradscope.watcher.recorder",
    "gradscope.watcher.manual",
    "gradscope.examples.models",
]
"""What the fork server imports once, so that no target pays for it: the main script
(`gradscope`'s entry point, which a worker would otherwise run again), torch, the parts of
it a first autograd.grad and a first forward-mode pass import (about a second), and the
modules the runners of inspect, gradcheck and watch import as they run (0.3 s). The
server never runs autograd: a process that did would hand its forks autograd's threads
(on a machine with a GPU), which they cannot use."""


@dataclass
class Died:
    """A worker that ended before it sent its target's result."""

    exitcode: int | None
    seconds: float
    """How long the target had run when its process ended."""

    def how(self) -> str:
        """`exit code 7`, `killed by SIGSEGV, signal 11`."""
        code = self.exitcode
        if code is None or code >= 0:
            return f"exit code {code}"
        with suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}, signal {-code}"
        return f"killed by signal {-code}"

    def cause(self) -> str:
        """What ends a process that way."""
        code = self.exitcode
        if code is None or code >= 0:
            return "os._exit() or an exit in native code"
        if -code in CRASHES:
            return "a crash in native code"
        if -code == signal.SIGKILL:
            return "a SIGKILL: its own, another process's or the out-of-memory killer's"
        return "a signal it sent itself or received"


CRASHES = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT}


class WorkerFailed(RuntimeError):
    """gradscope itself failed in a worker (a bug, exit 3), never the target's fault."""


def context() -> Any:
    """Workers forked from a fork server that has imported torch (the server never runs a
    target, and a worker is never a fork of this process, whose threads and state a target
    must not see); spawned where there is no fork server (Windows). The server lives as
    long as this process: each later worker starts in milliseconds."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def run_one(
    ctx: Any, job: Callable[..., Outcome], args: tuple[Any, ...], environ: dict[str, str]
) -> Outcome | Died:
    """`job(*args)` in a new worker process: its Outcome, or how the process died."""
    receive, send = ctx.Pipe(duplex=False)
    worker = ctx.Process(
        target=_work, args=(job, args, send, environ, (_Fd(1), _Fd(2))), daemon=True
    )
    worker.start()
    send.close()
    try:
        message = _await(receive, worker)
    except KeyboardInterrupt:  # Ctrl-C: the worker ends quietly, the parent reports it
        worker.terminate()
        worker.join()
        raise
    finally:
        receive.close()
    _reap(worker)
    if isinstance(message, Died):
        message.exitcode = worker.exitcode
        return message
    if message[0] == "failed":
        raise WorkerFailed(message[1])
    return message[1]


def _await(receive: Any, worker: Any) -> tuple[Any, ...] | Died:
    """The worker's result message, or Died. Watches the process as well as the pipe: a
    dead target's children (a DataLoader's workers) may still hold the pipe open."""
    started: float | None = None
    while True:
        wait([receive, worker.sentinel])
        if receive.poll():
            try:
                message = receive.recv()
            except EOFError:
                break
            if message[0] != "started":
                return message
            started = time.perf_counter()
        elif not worker.is_alive():
            break
    if started is None:
        worker.join()
        how = Died(worker.exitcode, 0).how()
        raise WorkerFailed(f"gradscope's worker process ended before its target started ({how})")
    return Died(None, time.perf_counter() - started)


def _reap(worker: Any) -> None:
    """The worker ends itself once its result is sent; one that does not is ended."""
    worker.join(5)
    if worker.is_alive():
        worker.kill()
        worker.join()


class _Fd:
    """One of this process's file descriptors, duplicated into the worker as it starts."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _received, (reduction.DupFd(self.fd),)


def _received(duplicate: Any) -> int:
    return int(duplicate.detach())


def _work(
    job: Callable[..., Outcome],
    args: tuple[Any, ...],
    send: Any,
    environ: dict[str, str],
    streams: tuple[Any, ...],
) -> None:
    """The worker: run one target and send its result. Ctrl-C reaches the whole process
    group: the parent alone answers it. The environment and stdout/stderr are the
    parent's now (a fork server's are those it started with, perhaps another command's;
    the working directory and sys.path come with the process). It ends with os._exit once
    the result is sent: threads, atexit handlers and finalizers the target left behind
    neither delay nor steer the check."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.clear()
    os.environ.update(environ)
    for target, fd in enumerate(streams, start=1):
        os.dup2(fd, target)
        os.close(fd)
    warm_up()  # torch's one-off lazy set-up, not billed to the target's time
    send.send(("started",))
    try:
        send.send(("done", job(*args)))
    except Exception as exc:  # gradscope's own failure: the job wraps the user's errors
        first = (str(exc).strip().splitlines() or [""])[0]
        send.send(("failed", f"{type(exc).__name__}: {first}\n{traceback.format_exc()}"))
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    os._exit(0)
