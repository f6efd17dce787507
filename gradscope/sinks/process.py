"""The sinks' own process: wandb, MLflow and TensorBoard write from here, so their
Python per row (wandb's `log`, MLflow's ORM store: about 0.6 and 0.5 ms a step) runs on
another core, never under the training's GIL (benchmarks/bench_sinks.py).

`attached.Sinks` starts it at the first read-back as `python -m gradscope.sinks.process
IN OUT` (two pipe descriptors) and sends, on IN: the sinks (bound in the training's
process, where the user's wandb or MLflow run is), then ("steps", points),
("failed", when, why), ("sync",) and ("end", ending or None). It answers on OUT: each
sink's (steps written, failure) at a sync, and their lines at the end. It imports no
torch and none of the user's code; Ctrl-C is the training's (this process finishes what
it was sent); the libraries' prints go to stderr, never to the user's stdout."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

POLL_S = 1.0
"""How often a quiet inbox checks that the training's process is still there."""


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.dup2(2, 1)  # a library's print: stderr
    inbox = Connection(int(argv[1]), writable=False)
    outbox = Connection(int(argv[2]), readable=False)
    sinks = inbox.recv()
    ending = None
    for frame in _frames(inbox, os.getppid()):
        kind = frame[0]
        if kind == "steps":
            for sink in sinks:
                sink.steps(frame[1])  # guarded: a failure stops that sink only
        elif kind == "failed":
            for sink in sinks:
                sink.stopped(frame[1], frame[2])
        elif kind == "sync":
            outbox.send([(s.written, s.failure) for s in sinks])
        elif kind == "end":
            ending = frame[1]
            break
    outbox.send([sink.finished(ending) for sink in sinks])
    return 0


def _frames(inbox: Connection, parent: int) -> Iterator[Any]:
    """The frames sent, until the end, the pipe closed or the training's process gone
    (its forked workers may hold the pipe open after it)."""
    while True:
        if not inbox.poll(POLL_S):
            if os.getppid() != parent:
                return
            continue
        try:
            yield inbox.recv()
        except (EOFError, OSError):
            return


if __name__ == "__main__":
    sys.exit(main(sys.argv))
