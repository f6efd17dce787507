"""Typer's value checking, built at a parameter's first value instead of at `--help`.

Typer 0.29 checks every parameter's value with a pydantic TypeAdapter, built the first
time the parameter is processed, even when it has no value: `gradscope watch --help`
processes the root's own --help option (value None) and so imported pydantic and
`importlib.metadata`, about half the command's start-up (docs/performance.md). A
parameter without a value needs no checking; the adapter is built when one arrives.
Elsewhere (a typer without `build_runtime_param`) this changes nothing.
"""

from __future__ import annotations

from typing import Any

import typer.core


class DeferredCheck:
    """One parameter's value checking, made on its first value that is not None."""

    def __init__(self, build: Any, descriptor: Any) -> None:
        self._build = build
        self._descriptor = descriptor
        self._made: Any = None

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None and not (param.multiple or param.nargs == -1):
            return None  # what typer's own check returns for a missing value
        if self._made is None:
            self._made = self._build(self._descriptor)
        return self._made.coerce(value, param=param, ctx=ctx)


def defer_value_checks() -> None:
    """Make typer build a parameter's check at its first value (idempotent)."""
    build = getattr(typer.core, "build_runtime_param", None)
    if build is None or getattr(build, "deferred", False):
        return

    def deferred(descriptor: Any) -> DeferredCheck:
        return DeferredCheck(build, descriptor)

    deferred.deferred = True  # type: ignore[attr-defined]
    typer.core.build_runtime_param = deferred  # type: ignore[assignment]
