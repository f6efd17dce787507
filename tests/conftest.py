"""Shared test set-up: one torch thread per xdist worker, a CLI runner, slow files first."""

from __future__ import annotations

import collections
import gc
import os
import signal

import pytest
from scheduling import make_scheduler, unit

# the suite reads the same on a laptop and in CI: watch's periodic status lines for CI
# ($CI set) are tested where a test sets CI itself
os.environ.pop("CI", None)
# `make test` runs one worker per CPU (pytest-xdist): one torch thread each, for the
# worker and the processes it starts, so that workers do not fight over the cores
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
# a suite started in the background by a shell without job control inherits Ctrl-C
# ignored, and so would every script it runs: the Ctrl-C tests need it delivered
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _survivors_frozen() -> None:
    """What is alive when a test starts (torch, the libraries earlier tests imported, their
    caches, a module-scoped fixture's model: 300,000 to 650,000 objects) leaves the
    collector's generations for good, after the garbage is collected: each watch's
    discovery walks `gc.get_objects()` (34-75 ms of CPU a run when they are in it) and each
    full collection walks the generations. Only survivors are frozen, so a test's garbage
    is still freed; a model built before the test (at import time, or by a fixture) is
    frozen too, and found by the watch as a script's frozen objects are
    (discover.reachable). Per test, not per file: a file's earlier tests' imports (dynamo,
    sympy) cost every later watch otherwise."""
    import torch  # noqa: F401  (what every run imports anyway: frozen with the rest)

    import gradscope.watcher  # noqa: F401

    gc.collect()
    gc.freeze()


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    """wandb offline, writing under tmp_path, set up afresh (wandb keeps its settings,
    WANDB_DIR among them, for the process) and torn down after."""
    import wandb

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    wandb.teardown()
    yield tmp_path
    wandb.teardown()


@pytest.fixture
def runner():
    from typer.testing import CliRunner

    return CliRunner()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Units of work (a file; SHARED_RUNS's files together) with the most `slow` tests (the
    launches, subprocesses and real runs) first, so that under pytest-xdist no long unit
    starts last and leaves one worker finishing alone; a unit's tests stay together and a
    file's in their order. xdist keeps this order only with --no-loadscope-reorder
    (`make test`); otherwise it runs the files with most tests first."""
    slow: collections.Counter[str] = collections.Counter(
        unit(item.nodeid) for item in items if item.get_closest_marker("slow")
    )
    items.sort(key=lambda item: (-slow[unit(item.nodeid)], unit(item.nodeid)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`make test`'s loadfile scheduling, with SHARED_RUNS's files as one unit."""
    return make_scheduler(config, log)
