"""What every sink is: fed each read-back's steps and the finished report, and never
the training's problem. A sink that fails (a network, a full disk, a bad URI mid-run)
stops writing and says why in `failure`; the run goes on and the report keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gradscope.findings import Finding

if TYPE_CHECKING:
    from gradscope.sinks.series import Points


@dataclass(frozen=True)
class Ending:
    """What a judged run's end gives every sink, made once in the training's process
    (attached.ending_of): the findings, the layers × steps heatmap as a PNG (None: nothing
    to draw) and the last step; `unpictured` says why the heatmap could not be drawn."""

    findings: tuple[Finding, ...]
    heatmap: bytes | None
    last_step: int
    unpictured: str | None = None


class Sink:
    """A destination: `write_steps` for each batch read back (its series, computed once
    for every sink from records already on the host: no extra sync), `write_end` once
    with a judged run's end, `close` always. `bind` runs in the training's process, the
    rest in the sinks' own (process.py): a sink is sent there as it is after `bind`."""

    option = "--sink"
    """How the user named it (`--wandb PROJECT`), for the failure's line."""

    def __init__(self, where: str | None) -> None:
        self.where = where
        self.failure: str | None = None
        self.written = 0
        """Steps written so far."""

    def steps(self, points: Points) -> None:
        if self.failure is None and points:
            self._guarded(f"at step {points[0][0]}", self.write_steps, points)
            if self.failure is None:
                self.written += len(points)

    def finished(self, ending: Ending | None) -> str | None:
        """The run's findings and heatmap written (None: the run was not judged), the
        sink closed; what failed, as one line, or None."""
        if self.failure is None and ending is not None:
            self._guarded("at the end", self.write_end, ending)
            if ending.unpictured is not None:
                self.stopped("drawing the heatmap", ending.unpictured)
        self._guarded("closing", self.close)
        return self.failure

    def _guarded(self, when: str, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except Exception as exc:  # never the script's problem
            self.stopped(when, described(exc))

    def stopped(self, when: str, why: str) -> None:
        """The sink stops writing; its first failure said (`why`: `described`)."""
        if self.failure is None:
            where = f" {self.where}" if self.where else ""
            self.failure = (
                f"{self.option}{where}: writing failed {when} ({why}); it stops after "
                f"{self.written} steps, the report covers them all"
            )

    def start(self) -> None:
        """`bind`, guarded as the writing is."""
        self._guarded("at its start", self.bind)

    def bind(self) -> None:
        """In the training's process, on its thread, at the first read-back (the writing
        is in another process): note the run the script started, if any."""

    def write_steps(self, points: Points) -> None:
        raise NotImplementedError

    def write_end(self, ending: Ending) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish only what the sink started (a run it opened), never the user's."""


def described(exc: BaseException) -> str:
    """An exception as a failure line says it: its type and the first line of its text."""
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"


def finding_text(f: Any) -> str:
    """A finding as a sink's text: severity, id, slug, subject, message and advice."""
    text = f"{f.severity} {f.rule} {f.slug} {f.subject}: {f.message}\n\n{f.advice}"
    if f.lead is not None:
        text += f"\n\nlead: {f.lead} steps after the warning {f.explained_by}"
    return text
