"""`make test`'s scheduling (tests/conftest.py): under `--dist loadfile` the files that read
one cache of real runs go to one worker, every other file stays a unit of its own."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest
from scheduling import SHARED_RUNS, make_scheduler

pytest.importorskip("xdist")
TESTS = os.path.dirname(os.path.abspath(__file__))


class _Config:
    """What xdist's schedulers read of a pytest config."""

    def __init__(self, dist: str):
        self.dist = dist
        self.option = SimpleNamespace(loadscopereorder=False)

    def getoption(self, name: str):
        return {"dist": self.dist}[name]

    def getvalue(self, name: str):
        return {"tx": ["2*popen"]}[name]


def _scope(nodeid: str) -> str:
    return make_scheduler(_Config("loadfile"), None)._split_scope(nodeid)


def test_the_real_runs_files_are_one_unit_and_other_files_their_own():
    real = "tests/watcher/real/test_real_{}.py::test_x[nanogpt]"
    scopes = {_scope(real.format(name)) for name in ("meaning", "oracle", "state", "verdicts")}
    assert scopes == {"tests/watcher/real/test_real_"}
    for nodeid in (
        "tests/watcher/real/test_oracle.py::test_x",  # the oracle's own units: no real run
        "tests/watcher/test_watch_cli.py::test_x[a::b]",
        "tests/cli/test_cli.py::TestX::test_y",
    ):
        assert _scope(nodeid) == nodeid.split("::", 1)[0]


def test_other_dist_modes_keep_xdists_scheduler():
    assert make_scheduler(_Config("load"), None) is None


def test_every_file_that_reads_the_real_runs_shares_their_unit():
    """A new file that judges runs.watched(...) or runs.plain(...) joins the unit, or each
    run it shares is made again on another worker."""
    folder = os.path.join(TESTS, "watcher", "real")
    readers = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf8") as f:
                if re.search(r"\bruns\.(watched|plain)\(", f.read()):
                    readers.append(f"tests/watcher/real/{name}")
    assert len(readers) >= 4
    assert all(path.startswith(SHARED_RUNS) for path in readers), readers
