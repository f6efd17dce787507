"""GS470 on gradient hooks (tests/watcher/domain_scripts/implicit_hooks.py): a DEQ's
implicit-backward hook registered twice on one tensor, and a scaling hook registered on a
weight at every step, are named at their line; the tutorial's DEQ (a fresh tensor each
forward, the hook removing itself), a hook registered once per weight and two different
hooks on one weight stay silent."""

from __future__ import annotations

import pytest

from tests.watcher.watch_scripts import domain_watched

SCRIPT = "implicit_hooks.py"


def _again(mode: str) -> list:
    return [f for f in domain_watched(SCRIPT, mode).findings if f.rule == "GS470"]


@pytest.mark.parametrize("mode", ["deq", "clip-once", "two-hooks"])
def test_hooks_registered_once_are_silent(mode):
    assert _again(mode) == []


def test_an_implicit_hook_registered_twice_is_named_at_its_line():
    (f,) = _again("deq-twice")
    assert f.rule == "GS470"
    assert f.steps[0] == 1 and "`backward_hook` at " in f.message
    assert "implicit_hooks.py:" in f.message and "done 2 times" in f.message
    assert "handle.remove()" in f.advice


def test_a_hook_registered_at_every_step_piles_up():
    (f,) = _again("scale-each-step")
    assert f.steps == (2, 3, 4, 5, 6) and "done 6 times" in f.message
