"""Shared runs: each seeded script is watched once per session and read by many tests."""

from __future__ import annotations

import functools
import os

import pytest

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "gradscope", "examples")


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


@functools.cache
def watched(name: str, *argv: str):
    from gradscope.watch import watch_script

    return watch_script(script(name), list(argv))


@pytest.fixture
def run_script():
    return watched
