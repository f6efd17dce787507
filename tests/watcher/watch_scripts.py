"""Shared by the watch tests: script paths, and each seeded script watched once per session."""

from __future__ import annotations

import functools
import os

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "gradscope", "examples")


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


@functools.cache
def watched(name: str, *argv: str):
    from gradscope.watcher import watch_script

    return watch_script(script(name), list(argv))
