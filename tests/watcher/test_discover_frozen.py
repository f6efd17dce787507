"""A script that freezes its objects (`gc.freeze()`, which takes them out of
`gc.get_objects`) still has its model found and named: discover.py looks for what the
running frames hold where the collector no longer lists it."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from gradscope.watcher import watch_script

SCRIPT = str(Path(__file__).parent / "scripts" / "frozen_heap_script.py")


@pytest.fixture(autouse=True)
def _unfrozen():
    yield
    gc.unfreeze()  # what the script froze, given back to the collector


@pytest.mark.parametrize(
    "args",
    [["global"], ["local"], ["trainer"], ["local", "clip"], ["trainer", "clip"]],
)
def test_a_frozen_model_is_found_and_named(args):
    report = watch_script(SCRIPT, args)
    assert report.run.status == "completed", report.run.error
    names = report.run.names()
    assert sorted(names) == [
        "body.0.bias",
        "body.0.weight",
        "body.2.bias",
        "body.2.weight",
        "unused.bias",
        "unused.weight",
    ]
    never = sorted(f.message.split()[0] for f in report.findings if f.rule == "GS413")
    assert never == ["unused.bias", "unused.weight"]
