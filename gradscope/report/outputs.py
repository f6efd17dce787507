"""Pick the reporter for a format and send its text where it belongs.

Besides the chosen format: on GitHub Actions (GITHUB_ACTIONS=true) findings are
also printed as `::error`/`::warning` annotations, on stdout unless the report
itself occupies stdout (then stderr); `--format markdown` is appended to
$GITHUB_STEP_SUMMARY as well when that is set.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from enum import Enum
from typing import Any

from gradscope.check import CheckReport
from gradscope.report.write import emit
from gradscope.results import Report


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
    junit = "junit"
    markdown = "markdown"


def write(
    fmt: Format,
    check: CheckReport,
    output: str | None,
    width: int | None = None,
    inspect: Report | None = None,
    top: int | None = 30,
) -> None:
    """`inspect` set: the single-target report of `gradscope inspect` (its own JSON/terminal)."""
    to_file = bool(output and output != "-")
    if fmt is Format.terminal:
        _terminal(check, inspect, output, width, top)
    else:
        text = _text(fmt, check, inspect)
        emit(text, output)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if fmt is Format.markdown and summary:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(text)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from gradscope.report import annotations

        stream = sys.stdout if to_file or fmt is Format.terminal else sys.stderr
        stream.write(annotations.render(check))
        stream.flush()


def _text(fmt: Format, check: CheckReport, inspect: Report | None) -> str:
    if fmt is Format.json:
        from gradscope.report import json as json_report

        return json_report.render(inspect) if inspect else json_report.dumps(check.to_dict())
    if fmt is Format.junit:
        from gradscope.report import junit

        return junit.render(check)
    from gradscope.report import markdown

    return markdown.render(check)


def _terminal(
    check: CheckReport,
    inspect: Report | None,
    output: str | None,
    width: int | None,
    top: int | None,
) -> None:
    from gradscope.report import terminal

    if inspect:
        paint_terminal(lambda console: terminal.render(inspect, console, top), output, width)
    else:
        paint_terminal(lambda console: terminal.render_check(check, console), output, width)


def paint_terminal(
    paint: Callable[[Any], None], output: str | None, width: int | None = None
) -> None:
    """Run `paint(console)` for stdout, or record it as plain text into `output`.

    Piped stdout without COLUMNS gets 120 columns rather than rich's 80.
    """
    from rich.console import Console

    if output and output != "-":
        console = Console(record=True, width=width or 120, file=io.StringIO(), color_system=None)
        paint(console)
        emit(console.export_text(), output)
        return
    if width is None and not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        width = 120
    paint(Console(width=width, highlight=False))
