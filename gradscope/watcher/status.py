"""Signs of life while `watch` runs: one status line on stderr.

On a terminal (stderr a TTY): one live line, redrawn at every read-back (step, loss,
steps/s, non-finite and AMP-skipped steps so far), the way rich's Live or tqdm's bar
keeps it: the line is cleared before anything the script prints (its sys.stdout and
sys.stderr are wrapped while the line is up), so it never mixes with the script's own
output, and it is gone at the end. Off under a machine format on stdout.

In CI (stderr not a terminal, $CI set as GitHub Actions, GitLab, CircleCI and others set
it): a plain line at the first read-back, then at most one every CI_EVERY_S seconds.
Elsewhere (a pipe, a file): nothing.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from gradscope.fmt import duration, num
from gradscope.watcher.listeners import STEP_LISTENERS

CI_EVERY_S = 30.0
"""Seconds between two status lines in CI."""
CLEAR = "\r\x1b[K"


def mode(machine_on_stdout: bool) -> str | None:
    """ "tty", "ci" or None (no status line)."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return None if machine_on_stdout else "tty"
    return "ci" if os.environ.get("CI", "").lower() not in ("", "0", "false") else None


class Status:
    """A step listener (watcher.listeners.STEP_LISTENERS) that keeps the status line."""

    def __init__(self, how: str, stream: TextIO | None = None) -> None:
        self.how = how
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.first: tuple[float, int] | None = None
        """(time, steps) at the first read-back: the rate is measured from there, past the
        script's imports and data loading."""
        self.steps = 0
        self.last_step = 0
        self.loss: float | None = None
        self.nonfinite: list[int] = []
        self.skipped = 0
        self.shown = False
        self.printed_at: float | None = None
        self._wrapped: list[tuple[str, _Cleared]] = []

    def __call__(self, records: list[Any], names: list[str]) -> None:
        for r in records:
            self.steps += 1
            self.last_step = max(self.last_step, r.step)
            if r.loss is not None:
                self.loss = r.loss
            finite = (r.loss is None or math.isfinite(r.loss)) and math.isfinite(r.grad_norm)
            if not finite and not r.skipped:
                self.nonfinite.append(r.step)
            self.skipped += bool(r.skipped)
        if self.first is None:
            self.first = (time.monotonic(), self.steps)
        if self.how == "tty":
            self._wrap()
            self.show()
        elif self.printed_at is None or time.monotonic() - self.printed_at >= CI_EVERY_S:
            self.printed_at = time.monotonic()
            self._write(f"gradscope: {self.text()}\n")

    def text(self) -> str:
        now = time.monotonic()
        parts = [f"step {self.last_step}", f"loss {num(self.loss)}"]
        if self.first is not None and now > self.first[0] and self.steps > self.first[1]:
            parts.append(f"{(self.steps - self.first[1]) / (now - self.first[0]):.3g} steps/s")
        if self.nonfinite:
            parts.append(f"non-finite from step {self.nonfinite[0]} ({len(self.nonfinite)})")
        if self.skipped:
            parts.append(f"{self.skipped} skipped (AMP)")
        return "watch: " + " · ".join(parts) + f" · {duration(now - self.started)}"

    def show(self) -> None:
        width = _columns(self.stream)
        self._write(CLEAR + f"gradscope: {self.text()}"[: width - 1])
        self.shown = True

    def hide(self) -> None:
        if self.shown:
            self.shown = False
            self._write(CLEAR)

    def close(self) -> None:
        """Clear the line and give the script's streams back as they were."""
        self.hide()
        for name, wrapper in reversed(self._wrapped):
            if getattr(sys, name) is wrapper:
                setattr(sys, name, wrapper.inner)
        self._wrapped.clear()

    def _wrap(self) -> None:
        """Clear the line before the script writes: its streams, while the line is up."""
        for name in ("stdout", "stderr"):
            current = getattr(sys, name)
            if not isinstance(current, _Cleared):
                wrapper = _Cleared(current, self)
                setattr(sys, name, wrapper)
                self._wrapped.append((name, wrapper))

    def _write(self, text: str) -> None:
        out = self.stream.inner if isinstance(self.stream, _Cleared) else self.stream
        try:
            out.write(text)
            out.flush()
        except (OSError, ValueError):  # stderr closed by the script: no status, no failure
            pass


class _Cleared:
    """A stream the script writes to: the status line is cleared first."""

    def __init__(self, inner: TextIO, status: Status) -> None:
        self.inner = inner
        self.status = status

    def write(self, text: str) -> int:
        self.status.hide()
        return self.inner.write(text)

    def writelines(self, lines: Any) -> None:
        self.status.hide()
        self.inner.writelines(lines)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


@contextmanager
def status_line(machine_on_stdout: bool, enabled: bool = True) -> Iterator[Status | None]:
    """The status line for one watched run, listening to its read-backs; None when off."""

    how = mode(machine_on_stdout) if enabled else None
    if how is None:
        yield None
        return
    status = Status(how)
    if how == "tty":  # before the script runs: a logging handler it makes holds the wrapper
        status._wrap()
    STEP_LISTENERS.append(status)
    try:
        yield status
    finally:
        STEP_LISTENERS.remove(status)
        status.close()
