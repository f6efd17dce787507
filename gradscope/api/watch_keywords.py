"""The keywords `api.watch(**given)` and `api.watch_script(**given)` take, typed: WatchOptions'
fields but the script's arguments (watch_script's own `argv`), so a type checker rejects a
misspelt one (`stepz=3`) before it runs; at run time WatchOptions.over says it in one line.
tests/api/test_watch_keywords.py keeps the two in step."""

from __future__ import annotations

from typing import TypedDict


class WatchKeywords(TypedDict, total=False):
    steps: int | None
    log: str | None
    plot: str | None
    tensorboard: str | None
    wandb: str | None
    mlflow: str | None
    update_every: int
    flush_every: int
    batch_size: int | None
    against: str | None
    hang_timeout: float | None
    nproc_per_node: int | None
    label: str | None
    quiet_stdout: bool
