"""Shared by the watch tests: script paths, and each seeded script watched once per session."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from typing import Any

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
DOMAINS = os.path.join(os.path.dirname(__file__), "domain_scripts")
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "gradscope", "examples")


def imported_from(tmp_path: Any, monkeypatch: Any, source: str, name: str, installed: bool) -> Any:
    """`source` imported as module `name` from a folder under tmp_path: one named
    site-packages (an installed library's, to gradscope) or not (the script's own)."""
    import importlib

    root = tmp_path / ("site-packages" if installed else "scripts")
    root.mkdir()
    (root / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def script(name: str) -> str:
    return os.path.join(SCRIPTS, name)


@functools.cache
def watched(name: str, *argv: str):
    from gradscope.watcher import watch_script

    return watch_script(script(name), list(argv))


@functools.cache
def domain_watched(name: str, *argv: str):
    """A script of domain_scripts/ (one training domain's canonical loop) watched once."""
    from gradscope.watcher import watch_script

    return watch_script(os.path.join(DOMAINS, name), list(argv))


def gradscope(*args: str, cwd: str = SCRIPTS) -> subprocess.CompletedProcess:
    """`python -m gradscope ARGS` at 80 columns, run in the scripts' folder so the
    script's paths read as the user typed them."""
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "gradscope", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def step_record(step: int, norm: float = 1.0, loss: float | None = 1.0, **fields):
    """A StepRecord of one parameter's step with the plain defaults; `fields` override."""
    from gradscope.steps.records import StepRecord

    base = dict(
        step=step,
        optimizer=0,
        loss=loss,
        grad_norm=norm,
        clipped_norm=None,
        max_norm=None,
        lrs=(0.1,),
        backward_calls=1,
        scale=None,
        skipped=False,
        carried_norm=None,
        param_norms=(norm,),
    )
    base.update(fields)
    return StepRecord(**base)


DOMAINS = os.path.join(os.path.dirname(__file__), "domain_scripts")


@functools.cache
def watched_domain(name: str, *argv: str):
    """A script of domain_scripts/ (one kind of training each) watched once per session."""
    from gradscope.watcher import watch_script

    return watch_script(os.path.join(DOMAINS, name), list(argv))
