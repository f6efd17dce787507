"""What every sink is: fed each read-back's steps and the finished report, and never
the training's problem. A sink that fails (a network, a full disk, a bad URI mid-run)
stops writing and says why in `failure`; the run goes on and the report keeps it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gradscope.sinks.series import Points
    from gradscope.watcher.report import WatchReport


class Sink:
    """A destination: `write_steps` for each batch read back (its series, computed once
    for every sink from records already on the host: no extra sync), `write_end` once
    with the report, `close` always."""

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

    def finished(self, report: WatchReport | None) -> str | None:
        """The report's findings and heatmap written (None: the run was not judged), the
        sink closed; what failed, as one line, or None."""
        if self.failure is None and report is not None:
            self._guarded("at the end", self.write_end, report)
        self._guarded("closing", self.close)
        return self.failure

    def _guarded(self, when: str, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except Exception as exc:  # never the script's problem
            self.failed(when, exc)

    def failed(self, when: str, exc: BaseException) -> None:
        """The sink stops writing; its first failure said."""
        if self.failure is None:
            where = f" {self.where}" if self.where else ""
            self.failure = (
                f"{self.option}{where}: writing failed {when} "
                f"({type(exc).__name__}: {_first_line(exc)}); it stops after "
                f"{self.written} steps, the report covers them all"
            )

    def start(self) -> None:
        """`bind`, guarded as the writing is."""
        self._guarded("at its start", self.bind)

    def bind(self) -> None:
        """On the training's thread, at the first read-back (the writing is in another):
        note the run the script started, where the host's API keeps it per thread."""

    def write_steps(self, points: Points) -> None:
        raise NotImplementedError

    def write_end(self, report: WatchReport) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Finish only what the sink started (a run it opened), never the user's."""


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def finding_text(f: Any) -> str:
    """A finding as a sink's text: severity, id, slug, subject, message and advice."""
    text = f"{f.severity} {f.rule} {f.slug} {f.subject}: {f.message}\n\n{f.advice}"
    if f.lead is not None:
        text += f"\n\nlead: {f.lead} steps after the warning {f.explained_by}"
    return text
