"""For the test files that watch many runs in one process: the objects alive before the file
starts (torch and the worker's other imports, earlier files' caches: 300,000 to 650,000 of
them) leave the garbage collector's generations while the file runs.

watch finds the script's models and optimizers by walking `gc.get_objects()` (discover.py)
at each run's first backward; none of those older objects is one a run of the file trains,
and walking them cost 37-75 ms of CPU a run: 5-10 s over test_watch_silent_order.py's 132
runs. Frozen, they are skipped by that walk and by the collector's own full passes. Every
model, optimizer and tensor a test makes is made after the freeze, so it is found as before;
a test that builds one at import time must not use this fixture."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def frozen_heap() -> Iterator[None]:
    import torch  # noqa: F401  (what every run imports anyway: frozen with the rest)

    import gradscope.watcher  # noqa: F401

    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
