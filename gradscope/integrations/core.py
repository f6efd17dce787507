"""What every host's callback does, around `gradscope.api.watch(options)` (the engine,
rules and report of `gradscope watch`): start at the host's train start, judge the run
so far as it goes (live.py), end at train end or on an exception, write the outputs, and
carry the watch's steps through the host's checkpoint. No torch, no host imported."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from gradscope import api
from gradscope.api.arguments import settings_or_default
from gradscope.api.options import WatchOptions
from gradscope.findings import Finding
from gradscope.integrations import live, writing
from gradscope.integrations.channels import Channel
from gradscope.watcher import resume
from gradscope.watcher.distributed_hooks import is_main_process
from gradscope.watcher.resume import Resume
from gradscope.watcher.state import StopWatching

Say = Callable[[int, str], None]
"""A host's logger: (a logging level, the line)."""


def python_logger(name: str = "gradscope") -> Say:
    log = logging.getLogger(name)
    return lambda level, text: log.log(level, "%s", text)


class HostWatch:
    """One watched training run inside a host: `start`, `poll` after each step, `end`."""

    def __init__(
        self,
        options: WatchOptions | None = None,
        outputs: Sequence[str] = (),
        stop_on_error: bool = False,
        settings: Any = None,
        say: Say | None = None,
        **given: Any,
    ) -> None:
        self.options = WatchOptions.over(options, given)
        self.outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
        self.stop_on_error = stop_on_error
        self.settings = settings_or_default(settings)
        self.say = say or python_logger()
        self.live = live.Live(self.settings)
        self.channels: list[Channel] = []
        """The host's loggers that take a finding as text (channels.py), set by the host."""
        self.report: Any = None
        self.findings: list[Finding] = []
        """The findings said as the run went."""
        self.stop_requested = False
        self._block: Any = None
        self._resume: Resume | None = None

    @property
    def watcher(self) -> Any:
        return getattr(self._block, "watcher", self._block)

    @property
    def active(self) -> bool:
        return self._block is not None

    def start(self) -> None:
        """Enter the watch (once; a second train start inside one is the same run). A
        failure of gradscope's own is said, and the training runs on unwatched."""
        if self._block is not None:
            return
        try:
            self._enter()
        except Exception as exc:
            self.say(logging.WARNING, f"gradscope: not watching, starting failed: {exc}")

    def _enter(self) -> None:
        block = api.watch(self.options, self.settings)
        getattr(block, "watcher", block).resume = self._resume
        self._resume = None  # taken: a later run of this callback starts afresh
        block.__enter__()  # under torchrun api.watch binds the distributed hooks
        self._block = block

    def poll(self) -> list[Finding]:
        """The live findings new since the last poll, each said through the host's
        logger; with stop_on_error, an error among them asks the host to stop."""
        if self._block is None:
            return []
        try:
            found = self.live.poll(self.watcher)
        except Exception as exc:  # gradscope's own failure: said once, never the run's
            self.say(logging.WARNING, f"gradscope: judging the run so far failed: {exc}")
            self.live.ready_at = float("inf")
            return []
        for f in found:
            self.say(logging.ERROR if live.stops([f]) else logging.WARNING, live.line(f))
            self._tell(f)
        self.findings += found
        if self.stop_on_error and live.stops(found) and not self.stop_requested:
            self.stop_requested = True
            self.say(logging.ERROR, "gradscope: stopping the run on this error (stop_on_error)")
        return found

    def _tell(self, f: Finding) -> None:
        """The finding through each of the host's loggers; one that fails is said once and
        left out from then on (a logger is never the run's problem)."""
        for channel in list(self.channels):
            try:
                channel(f)
            except Exception as exc:
                self.channels.remove(channel)
                self.say(logging.WARNING, f"gradscope: a logger took no finding: {exc}")

    def end(self, exc: BaseException | None = None) -> Any:
        """Leave the watch (the partial report when `exc` ended the run), then write the
        outputs, or log the report when none was named. The report; None if never started."""
        if self._block is None:
            return self.report
        block, self._block = self._block, None
        if exc is None and self.stop_requested:  # the report says "stopped", not completed
            exc = StopWatching()
        try:
            block.__exit__(type(exc) if exc is not None else None, exc, None)
            self.report = block.report
        except Exception as failure:  # gradscope's own (or a rank's timeout): never the run's
            self.say(logging.WARNING, f"gradscope: the report was lost: {failure}")
            return None
        if is_main_process():
            self._write()
        return self.report

    def _write(self) -> None:
        if not self.outputs:
            self.say(logging.INFO, writing.text(self.report))
            return
        for failure in writing.deliver(self.report, self.outputs, self.settings):
            self.say(logging.WARNING, f"gradscope: not written: {failure}")

    def state_dict(self) -> dict[str, Any]:
        """The steps so far, as plain values, for the host's checkpoint."""
        if self._block is not None:
            watcher = self.watcher
            watcher.recorder.flush()
            resume = Resume(tuple(watcher.recorder.records), watcher.state.steps)
        elif self.report is not None:
            steps = tuple(self.report.run.steps)
            resume = Resume(steps, steps[-1].step if steps else 0)
        else:
            resume = self._resume or Resume((), 0)
        return {"gradscope": 1, **resume.state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the checkpoint's run: its steps first, the next numbered on."""
        if state.get("gradscope") != 1:
            return
        self._resume = Resume.of(state)
        if self._block is None:
            return
        watcher = self.watcher
        if watcher.state.steps or watcher.recorder.pending:  # steps of its own already
            self.say(logging.WARNING, "gradscope: a checkpoint loaded after steps: not resumed")
            return
        resume.apply(self._resume, watcher.state, watcher.recorder)  # loaded before a step
        self._resume = None
