"""The hosts' tests: a read-back and a live judgement at every step, however fast (a
run's steps of a millisecond are otherwise read back at most once in 50 ms and judged
within a 2.5% time budget, so what a test waits for could come at the end only)."""

from __future__ import annotations

import pytest


@pytest.fixture
def every_step(monkeypatch):
    monkeypatch.setattr("gradscope.watcher.recorder.MIN_FLUSH_INTERVAL_S", 0.0)
    monkeypatch.setattr("gradscope.integrations.live.BUDGET", 1.0)
