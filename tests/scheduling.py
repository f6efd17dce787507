"""`make test`'s units of work under pytest-xdist (tests/conftest.py's hooks call these): a
module of its own, not conftest.py, so that a test can import it whichever conftest.py
pytest collected last."""

from __future__ import annotations


def unit(nodeid: str) -> str:
    """The unit of work a test belongs to under `make test`: its file, or SHARED_RUNS's,
    or SHARED_LAUNCH's."""
    path = nodeid.split("::", 1)[0]
    if path in SHARED_LAUNCH:
        return SHARED_LAUNCH[0]
    return next((p for p in SHARED_RUNS if path.startswith(p)), path)


SHARED_RUNS = ("tests/watcher/real/test_real_",)
"""Files that read one per-process cache of runs (tests/watcher/real/runs.py: nanoGPT, vae,
mnist ... each watched once): under `--dist loadfile` they go to one worker together, so
that a run two of them judge is made once, not once per worker."""


SHARED_LAUNCH = ("tests/distributed/test_dist_stop.py", "tests/distributed/test_dist_watch.py")
"""Files whose 2-rank scenarios share one torchrun launch (tests/distributed/shared_launch.py's
`share`): one worker runs them, so the launch's ranks (about 6.5 s of CPU before their
first scenario) start once, not once per worker."""


def make_scheduler(config, log):
    """`make test`'s loadfile scheduling, with SHARED_RUNS's files as one unit (and
    SHARED_LAUNCH's as another)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SharedRunsScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit(nodeid)

    return SharedRunsScheduling(config, log)
