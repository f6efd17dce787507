"""The sinks a watch was asked for, as one step listener (watcher.session.STEP_LISTENERS):
checked before the run (a missing package is one line, exit 2), fed every read-back on
the main process, ended with the report. What failed is a line each, for the report's
`unwritten` (exit 2 from the command line, as for an unwritten --log).

The writing happens in a thread of its own: a read-back hands its records (already on
the host, immutable) over and the training goes on; a local MLflow store or a TensorBoard
file takes milliseconds per read-back, which a small model's step would wait for
(benchmarks/bench_sinks.py). The series are computed there once for every sink (on 2
cores the writer's CPU time is the training's too). The end drains what is queued before
the findings."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gradscope.report.write import folder_destination
from gradscope.sinks import mlflow_sink, tensorboard_sink, wandb_sink
from gradscope.sinks.protocol import Sink
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
        self._queue: queue.SimpleQueue[list[Any] | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
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
            self._writer = threading.Thread(target=self._write, name="gradscope-sinks")
            self._writer.daemon = True
            self._writer.start()
        self._queue.put(list(records))

    def _write(self) -> None:
        while (batch := self._queue.get()) is not None:
            try:
                points = self.series.of(batch)  # one computation, read by every sink
            except Exception as exc:  # the thread goes on: every sink stops, and says why
                for sink in self.sinks:
                    sink.failed(f"at step {batch[0].step}", exc)
                continue
            for sink in self.sinks:
                sink.steps(points)  # guarded: a failure stops that sink only

    def drained(self, timeout: float = DRAIN_S) -> list[Sink]:
        """Wait for the queued steps to be written; the sinks still writing after
        `timeout` (a store that hangs), each with its failure said."""
        if self._writer is None:
            return []
        self._queue.put(None)
        self._writer.join(timeout)
        if not self._writer.is_alive():
            self._writer = None  # a later read-back starts another
            return []
        for sink in self.sinks:
            sink.failure = sink.failure or (
                f"{sink.option} {sink.where}: still writing after {timeout:g} s, left behind"
            )
        return self.sinks

    def finished(self, report: WatchReport | None) -> list[str]:
        """The queued steps written, then each sink ended (the findings and heatmap of a
        judged run); the lines of those that failed."""
        if os.getpid() != self._pid or not is_main_process():
            return []
        stuck = self.drained()
        judged = report if report is not None and report.judged else None
        lines = [s.failure if s in stuck else s.finished(judged) for s in self.sinks]
        return [line for line in lines if line]
