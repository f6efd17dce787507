"""Render a result in the chosen format, and deliver the text where it belongs.

Every renderer has one shape: it takes a result and a View and returns text
(terminal text is painted by rich into a string). Only `deliver` writes: to
stdout, or atomically to the file the user named. Besides the chosen format: on
GitHub Actions (GITHUB_ACTIONS=true) findings are also printed as `::error` /
`::warning` annotations, on stdout unless the report itself occupies stdout
(then stderr); markdown is appended to $GITHUB_STEP_SUMMARY as well when set.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import TYPE_CHECKING

from gradscope.report.console import View, view_for
from gradscope.report.write import append_to, emit, to_stdout

if TYPE_CHECKING:  # the CLI imports this module for Format: --help stays cheap
    from gradscope.check import CheckReport
    from gradscope.results import Report


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
    junit = "junit"
    markdown = "markdown"


def render(fmt: Format, check: CheckReport, view: View, inspect: Report | None = None) -> str:
    """`inspect` set: the single-target report of `gradscope inspect` (its own JSON/terminal)."""
    if fmt is Format.terminal:
        from gradscope.report import terminal

        return terminal.render(inspect, view) if inspect else terminal.render_check(check, view)
    if fmt is Format.json:
        from gradscope.report import json as json_report

        return json_report.render(inspect) if inspect else json_report.dumps(check.to_dict())
    if fmt is Format.junit:
        from gradscope.report import junit

        return junit.render(check)
    from gradscope.report import markdown

    return markdown.render(check)


def write(
    fmt: Format,
    check: CheckReport,
    output: str | None,
    width: int | None = None,
    inspect: Report | None = None,
    top: int | None = 30,
) -> None:
    """Render, deliver, then the CI extras (step summary, annotations)."""
    text = render(fmt, check, view_for(output, width, top), inspect)
    emit(text, output)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if fmt is Format.markdown and summary:
        append_to(summary, text)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from gradscope.report import annotations

        stream = sys.stderr if to_stdout(output) and fmt is not Format.terminal else sys.stdout
        stream.write(annotations.render(check))
        stream.flush()
