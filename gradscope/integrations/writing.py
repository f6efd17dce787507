"""The report written where a host's user asked, as `gradscope watch -o` writes it: each
output's format by its extension (.json, .md, .xml; .png, .svg, .pdf: the run's plot;
any other: the terminal text), through the commands' one writer (report/outputs.py).
Nothing here raises into training: each output that could not be written is one line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from gradscope.api.pictures import PLOT_FORMATS, Plot
from gradscope.errors import GradscopeError
from gradscope.report import outputs as writer
from gradscope.report import watch_plot
from gradscope.report.console import View
from gradscope.report.write import NotWritten


def deliver(report: Any, names: Sequence[str], settings: Any) -> list[str]:
    """Write `report` to every name; what failed, one line each naming its file."""
    failed = []
    for name in names:
        try:
            if _picture(name):
                _draw(report, name)
            else:
                where = writer.plan(None, [name])
                writer.deliver(where, report.outcome(), settings.fail_on)
        except NotWritten as exc:
            failed += [f"{name}: {line}" for line in exc.lines]
        except (GradscopeError, OSError, ValueError) as exc:
            failed.append(f"{name}: {exc}")
    return failed


def text(report: Any) -> str:
    """The terminal report, uncoloured: what a host logs when no output was named."""
    return writer.terminal(report.outcome(), View(color=False))


def _picture(name: str) -> bool:
    return os.path.splitext(name)[1].lower().lstrip(".") in PLOT_FORMATS


def _draw(report: Any, name: str) -> None:
    plot = Plot.of(name)
    if plot is None or not report.judged:
        raise GradscopeError("not drawn, no step was recorded")
    plot.draw(watch_plot.render, report)
