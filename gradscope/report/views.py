"""Each result type's own terminal view. A result sits below the writer and never imports
it, so the writer looks the view up by the result's type: one entry per result type, no
question asked of its kind or its document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gradscope.diff.result import DiffResult
from gradscope.diff.runs.result import RunsDiff
from gradscope.gradcheck.results import GradcheckReport
from gradscope.graph.result import GraphResult
from gradscope.inspector.results import Report
from gradscope.outcome import Result
from gradscope.report import (
    diff_runs_terminal,
    diff_terminal,
    gradcheck_terminal,
    graph_terminal,
    watch_terminal,
)
from gradscope.report import terminal as inspect_terminal
from gradscope.report.console import View
from gradscope.watcher.report import WatchReport


def _views() -> dict[type, tuple[Callable[[Any, View], str], bool]]:
    """result type → (its renderer, whether it marks the ignored findings itself)."""
    return {
        Report: (inspect_terminal.render, True),
        WatchReport: (watch_terminal.render, False),
        GradcheckReport: (gradcheck_terminal.render, False),
        DiffResult: (diff_terminal.render, False),
        RunsDiff: (diff_runs_terminal.render, True),
        GraphResult: (graph_terminal.render, False),
    }


def terminal(result: Result, view: View) -> str:
    """The result's terminal report."""
    return _views()[type(result)][0](result, view)


def marks_ignored(result: Result) -> bool:
    """Whether the result's view shows the findings the config silenced itself."""
    return _views()[type(result)][1]
