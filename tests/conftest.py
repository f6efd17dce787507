"""Shared test set-up: one torch thread per xdist worker, a CLI runner, slow files first."""

from __future__ import annotations

import collections
import os

import pytest

# the suite reads the same on a laptop and in CI: watch's periodic status lines for CI
# ($CI set) are tested where a test sets CI itself
os.environ.pop("CI", None)
# `make test` runs one worker per CPU (pytest-xdist): one torch thread each, for the
# worker and the processes it starts, so that workers do not fight over the cores
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


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
        _unit(item.nodeid) for item in items if item.get_closest_marker("slow")
    )
    items.sort(key=lambda item: (-slow[_unit(item.nodeid)], _unit(item.nodeid)))


def _unit(nodeid: str) -> str:
    """The unit of work a test belongs to under `make test`: its file, or SHARED_RUNS's."""
    path = nodeid.split("::", 1)[0]
    return next((p for p in SHARED_RUNS if path.startswith(p)), path)


SHARED_RUNS = ("tests/watcher/real/test_real_",)
"""Files that read one per-process cache of runs (tests/watcher/real/runs.py: nanoGPT, vae,
mnist ... each watched once): under `--dist loadfile` they go to one worker together, so
that a run two of them judge is made once, not once per worker."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`make test`'s loadfile scheduling, with SHARED_RUNS's files as one unit."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedRunsScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return SharedRunsScheduling(config, log)
