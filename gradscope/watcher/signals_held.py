"""Ctrl-C and SIGTERM held off while the recorder reads a batch of steps back (a read cut in
half would lose the steps in it), then delivered to whatever handlers were there. No torch."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def ctrl_c_held() -> Iterator[None]:
    """Defer SIGINT and SIGTERM for the block, then deliver them to whatever handlers were
    there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous_term = signal.signal(signal.SIGTERM, lambda signum, frame: caught.append(signum))
    try:
        with _sigint_held(caught):
            yield
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        if signal.SIGTERM in caught:
            signal.raise_signal(signal.SIGTERM)


@contextmanager
def _sigint_held(caught: list[int]) -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if signal.SIGINT in caught:
            signal.raise_signal(signal.SIGINT)
