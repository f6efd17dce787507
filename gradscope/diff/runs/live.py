"""`gradscope watch train.py --against REF.jsonl`: the running script compared with a
reference log as its steps are read back (every --flush-every steps), the first
divergence announced on stderr when it is found, and a short verdict at the end.

A failure in the comparison never reaches the script: the comparison stops with a note.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gradscope import fmt
from gradscope.diff.runs import RunsOptions, comparer, conclude, log
from gradscope.diff.runs.findings import gap_text
from gradscope.diff.runs.result import Divergence, RunsDiff
from gradscope.findings import split_ignored
from gradscope.watcher.distributed_hooks import is_main_process
from gradscope.watcher.listeners import STEP_LISTENERS

if TYPE_CHECKING:
    from gradscope.config import Settings
    from gradscope.watcher.report import WatchReport


class Against:
    """A step listener (gradscope.watcher.listeners.STEP_LISTENERS) feeding a RunsComparer."""

    def __init__(self, ref_path: str, options: RunsOptions | None = None) -> None:
        self.ref_path = ref_path
        self.comparer = comparer(log.read(ref_path), options or RunsOptions())
        self.failure: str | None = None
        self.announced: list[str] = []

    def __call__(self, records: Sequence[Any], names: Sequence[str]) -> None:
        if self.failure is not None:
            return
        try:
            for record in records:
                found = self.comparer.feed(log.Step.from_record(record), names)
                if found is not None:
                    self._announce(found)
        except Exception as exc:  # never the script's problem
            self.failure = f"--against: the comparison stopped: {type(exc).__name__}: {exc}"

    def _announce(self, d: Divergence) -> None:
        top = d.gaps[0]
        line = (
            f"--against {self.ref_path}: the run parts from the reference at step {d.step}: "
            f"{top.new} {gap_text(top)}"
        )
        self.announced.append(line)
        _say(line)

    def result(self, label: str = "this run") -> RunsDiff:
        notes = [self.failure] if self.failure else []
        return conclude(self.comparer, label, notes)

    def joined(self, report: WatchReport, settings: Settings) -> WatchReport:
        """The watch report with the comparison's findings (GS607-GS609) among its own,
        judged by the same settings: the report shows them and --fail-on counts them."""
        active, ignored = split_ignored(settings.judged(self.result().findings))
        return replace(
            report,
            findings=sorted(report.findings + active, key=lambda f: (-f.severity, f.rule)),
            ignored=report.ignored + ignored,
        )


def summary(result: RunsDiff) -> list[str]:
    """The end-of-run lines: the verdict, the first divergence, whether each run trained."""
    ref = result.ref_label
    if result.could_not_run:
        return [f"--against {ref}: {result.could_not_run}"]
    compared = sum(result.common.values())
    first = result.first
    if first is None:
        lines = [f"--against {ref}: {result.verdict()} over {compared} common steps"]
    else:
        names = ", ".join(p.new for p in result.parting if p.step == first.step)
        lines = [
            f"--against {ref}: the runs differ from step {first.step} of {compared} compared"
            + (f" (first: {fmt.clip(names, 80)})" if names else "")
        ]
    for t in result.training:
        who = "reference" if t.run == "ref" else "this run"
        state = {True: "trained", False: "did NOT train", None: "not judged"}[t.trained]
        lines.append(f"--against {ref}: {who} {state}: {t.why}")
    return lines + [f"--against {ref}: {n}" for n in result.notes]


def _say(line: str) -> None:
    sys.stderr.write(f"gradscope: {fmt.printable(line)}\n")
    sys.stderr.flush()


@contextlib.contextmanager
def against(path: str | None) -> Iterator[Against | None]:
    """Compare the watched run with the log at `path` (None: do nothing). The log is read
    before the script runs, so an unreadable one costs no run (exit 2)."""

    if path is None or not is_main_process():
        yield None
        return
    listener = Against(path)
    STEP_LISTENERS.append(listener)
    try:
        yield listener
    finally:
        STEP_LISTENERS.remove(listener)
        for line in summary(listener.result()):
            _say(line)
