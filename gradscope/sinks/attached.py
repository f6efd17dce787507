"""The sinks a watch was asked for, as one step listener (watcher.session.STEP_LISTENERS):
checked before the run (a missing package is one line, exit 2), fed every read-back on
the main process, ended with the report. What failed is a line each, for the report's
`unwritten` (exit 2 from the command line, as for an unwritten --log).

The writing happens in a process of its own (process.py), started at the first
read-back: the libraries' Python per row would otherwise hold the training's GIL for
about a millisecond a step (benchmarks/bench_sinks.py). A read-back hands its records
(already on the host, immutable) to a thread here, which computes the series once for
every sink and sends them down a pipe; the training goes on. The end sends the findings
and the heatmap, drawn once, and waits for the sinks' lines."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from gradscope.report.watch_plot import heatmap
from gradscope.report.write import folder_destination
from gradscope.sinks import mlflow_sink, tensorboard_sink, wandb_sink
from gradscope.sinks.protocol import Ending, Sink, described
from gradscope.sinks.series import Series
from gradscope.watcher.distributed_hooks import is_main_process
from gradscope.watcher.listeners import STEP_LISTENERS

if TYPE_CHECKING:
    from gradscope.watcher.report import WatchReport

DRAIN_S = 300.0
"""How long the end waits for the queued steps to be written (a store that hangs)."""


class Sinks:
    """`with Sinks.of(...):` around the watched run, then `finished(report)`."""

    def __init__(self, sinks: Sequence[Sink] = ()) -> None:
        self.sinks = list(sinks)
        self._pid = os.getpid()
        self._queue: queue.SimpleQueue[tuple[str, Any] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._process: Writing | None = None
        self.series = Series()

    @classmethod
    def of(
        cls,
        label: str,
        wandb: str | None = None,
        mlflow: str | None = None,
        tensorboard: str | None = None,
    ) -> Sinks:
        """The sinks asked for, each package checked now, before anything runs."""
        sinks: list[Sink] = []
        if tensorboard is not None:
            tensorboard_sink.require()
            folder = folder_destination(tensorboard, "--tensorboard")
            sinks.append(tensorboard_sink.TensorboardSink(folder))
        if wandb is not None:
            wandb_sink.require()
            sinks.append(wandb_sink.WandbSink(wandb, label))
        if mlflow is not None:
            mlflow_sink.require()
            sinks.append(mlflow_sink.MlflowSink(mlflow, label))
        return cls(sinks)

    def __bool__(self) -> bool:
        return bool(self.sinks)

    def __enter__(self) -> Sinks:
        if self.sinks:
            STEP_LISTENERS.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self in STEP_LISTENERS:
            STEP_LISTENERS.remove(self)

    def __call__(self, records: list[Any], names: list[str]) -> None:
        if os.getpid() != self._pid or not is_main_process():
            return  # a forked child, or a rank other than 0: rank 0 writes
        if self._writer is None:
            for sink in self.sinks:
                sink.start()
            self._process = Writing.started(self.sinks)
            self._writer = threading.Thread(target=self._write, name="gradscope-sinks")
            self._writer.daemon = True
            self._writer.start()
        self._queue.put(("steps", list(records)))

    def _write(self) -> None:
        """The series of each read-back computed once, for every sink, and sent."""
        while (item := self._queue.get()) is not None:
            kind, batch = item
            frame: tuple[Any, ...] = item
            if kind == "steps":
                try:
                    frame = ("steps", self.series.of(batch))
                except Exception as exc:  # every sink stops, and says why
                    frame = ("failed", f"at step {batch[0].step}", described(exc))
            if self._process is not None:
                self._process.send(frame)

    def drained(self, timeout: float = DRAIN_S) -> None:
        """Wait for the steps handed over so far to be written; each sink's count and
        failure brought back here."""
        if self._process is not None:
            self._queue.put(("sync", None))
            self._process.synced(timeout)

    def finished(self, report: WatchReport | None) -> list[str]:
        """The queued steps written, then each sink ended with the findings and heatmap
        of a judged run; the lines of those that failed."""
        if os.getpid() != self._pid or not is_main_process():
            return []
        if self._process is None:
            return [s.failure for s in self.sinks if s.failure]
        ending = ending_of(report) if report is not None and report.judged else None
        self._queue.put(("end", ending))
        self._queue.put(None)
        deadline = time.monotonic() + DRAIN_S
        assert self._writer is not None
        self._writer.join(DRAIN_S)
        lines = self._process.ended(deadline)
        self._writer = self._process = None  # a later read-back starts another
        return [line for line in lines if line]


def ending_of(report: WatchReport) -> Ending:
    """The findings, the heatmap drawn once for every sink, the last step."""
    last = report.run.steps[-1].step if report.run.steps else 0
    try:
        picture, why = heatmap(report), None
    except Exception as exc:  # the findings are written all the same
        picture, why = None, described(exc)
    return Ending(tuple(report.findings), picture, last, why)


class Writing:
    """The sinks' process, seen from the training's: frames sent down one pipe, answers
    read from another. A process that cannot start, or dies, stops every sink with a
    line; the training never waits on it except at a sync and at the end."""

    def __init__(self, sinks: Sequence[Sink]) -> None:
        self.sinks = sinks
        self.process: subprocess.Popen[bytes] | None = None
        self.outbox: Connection | None = None
        self.inbox: Connection | None = None
        self.sent = 0
        """Steps sent, for the line of a process lost."""

    @classmethod
    def started(cls, sinks: Sequence[Sink]) -> Writing:
        """`python -m gradscope.sinks.process`, this gradscope first on its path, the
        sinks sent; its stderr is this process's."""
        writing = cls(sinks)
        down, up = os.pipe(), os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "gradscope.sinks.process", str(down[0]), str(up[1])]
        try:
            writing.process = subprocess.Popen(
                command, pass_fds=(down[0], up[1]), stdin=subprocess.DEVNULL, env=env
            )
        except OSError as exc:
            os.close(down[1])
            os.close(up[0])
            writing.lost(f"the sinks' process did not start ({described(exc)}); nothing written")
            return writing
        finally:
            os.close(down[0])
            os.close(up[1])
        writing.outbox = Connection(down[1], readable=False)
        writing.inbox = Connection(up[0], writable=False)
        writing.send(list(sinks))
        return writing

    def send(self, frame: Any) -> None:
        if self.outbox is None:
            return
        try:
            self.outbox.send(frame)
        except Exception:
            self.lost(self._ended())
            return
        if frame[0] == "steps":
            self.sent += len(frame[1])

    def synced(self, timeout: float) -> None:
        """Each sink's steps written and failure, as the process has them now."""
        answer = self._answer(timeout) or ()
        for sink, (written, failure) in zip(self.sinks, answer, strict=False):
            sink.written, sink.failure = written, sink.failure or failure

    def ended(self, deadline: float) -> list[str | None]:
        """Each sink's line from the process (None: written); a process that does not
        answer by `deadline` is stopped, each sink's line says so."""
        answer = self._answer(max(0.0, deadline - time.monotonic()), DRAIN_S)
        if self.process is not None:
            if answer is None:
                self.process.kill()
            self.process.wait()
        for channel in (self.outbox, self.inbox):
            if channel is not None:
                channel.close()
        self.outbox = self.inbox = None
        return list(answer) if answer is not None else [s.failure for s in self.sinks]

    def _answer(self, timeout: float, waited: float | None = None) -> Any:
        """The next answer within `timeout`; None, every sink stopped, after `waited` in
        all (the run's end waits DRAIN_S for the queue and the answer together)."""
        if self.inbox is None:
            return None
        try:
            if self.inbox.poll(timeout):
                return self.inbox.recv()
        except Exception:
            self.lost(self._ended())
            return None
        self.lost(f"still writing after {waited or timeout:g} s, left behind")
        return None

    def _ended(self) -> str:
        code = self.process.poll() if self.process is not None else None
        return (
            f"the sinks' process ended (exit code {code}) after {self.sent} steps were sent to it"
        )

    def lost(self, why: str) -> None:
        """Every sink stops with `why` (the report covers every step all the same)."""
        for sink in self.sinks:
            where = f" {sink.where}" if sink.where else ""
            sink.failure = sink.failure or f"{sink.option}{where}: {why}"
        self.outbox = None


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
"""The folder holding this gradscope package, first on the sinks' process's path."""
