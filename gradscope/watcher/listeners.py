"""Who hears each batch of steps as it is read back: the status line, `watch --against`'s
comparer. A list of its own, so a listener's module need not load the session (and the
watch judge behind it). No torch."""

from __future__ import annotations

from collections.abc import Callable

from gradscope.steps.records import StepRecord

STEP_LISTENERS: list[Callable[[list[StepRecord], list[str]], None]] = []
"""Called with each batch of steps read back and the tracked names (`watch --against`)."""
