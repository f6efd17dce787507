"""The one output path of every command: render an outcome in the chosen format, deliver
it, then the CI extras.

Every renderer takes a result and a View and returns text (terminal text is painted by
rich into a string). Only `write` delivers: to stdout, or atomically to the file the
user named. Besides the chosen format: on GitHub Actions (GITHUB_ACTIONS=true) findings
are also printed as `::error` / `::warning` annotations, on stdout unless the report
itself occupies stdout (then stderr); markdown is appended to $GITHUB_STEP_SUMMARY as
well when set.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import TYPE_CHECKING

from gradscope.report.console import View, view_for
from gradscope.report.write import append_to, emit, to_stdout

if TYPE_CHECKING:  # the CLI imports this module for Format: --help stays cheap
    from gradscope.findings import Severity
    from gradscope.outcome import CheckReport, Outcome


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
    junit = "junit"
    markdown = "markdown"


def write(
    fmt: Format,
    result: Outcome | CheckReport,
    output: str | None,
    fail_on: Severity | None,
    width: int | None = None,
    top: int | None = 30,
) -> None:
    """Render one command's outcome (or `check`'s several), deliver it, then the CI
    extras (step summary, annotations)."""
    from gradscope.outcome import CheckReport

    check = result if isinstance(result, CheckReport) else CheckReport([result], fail_on)
    single = None if isinstance(result, CheckReport) else result
    text = render(fmt, check, view_for(output, width, top), single)
    emit(text, output)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if fmt is Format.markdown and summary:
        append_to(summary, text)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        from gradscope.report import annotations

        stream = sys.stderr if to_stdout(output) and fmt is not Format.terminal else sys.stdout
        stream.write(annotations.render(check))
        stream.flush()


def render(fmt: Format, check: CheckReport, view: View, single: Outcome | None = None) -> str:
    """`single`: the outcome of one command (its own terminal report and JSON document);
    None: `gradscope check`'s combined report."""
    if fmt is Format.terminal:
        return terminal(single, view) if single else _check_terminal(check, view)
    if fmt is Format.json:
        from gradscope.report.json import dumps

        return dumps(single.to_dict() if single else check.to_dict())
    if fmt is Format.junit:
        from gradscope.report import junit

        return junit.render(check)
    from gradscope.report import markdown

    return markdown.render(check)


def terminal(outcome: Outcome, view: View) -> str:
    """The command's own terminal report, from the result it judged (`detail`), then the
    findings the config silenced, for the renderers that do not mark them themselves."""
    text = _own_terminal(outcome, view)
    runs = outcome.kind == "diff" and (outcome.document or {}).get("mode") == "runs"
    if outcome.ignored and outcome.kind != "inspect" and not runs:
        from gradscope.findings import ignored_summary
        from gradscope.report import layout
        from gradscope.report.console import paint

        said = ignored_summary(outcome.ignored) + " by the config: in --format json, not failing"
        text += paint(lambda console: layout.note(console, said, indent=0), view)
    return text


def _own_terminal(outcome: Outcome, view: View) -> str:
    if outcome.kind == "watch":
        from gradscope.report import watch_terminal

        return watch_terminal.render(outcome.detail, view)
    if outcome.kind == "gradcheck":
        from gradscope.report import gradcheck_terminal

        return gradcheck_terminal.render(outcome.detail, view)
    if outcome.kind == "diff" and outcome.document and outcome.document.get("mode") == "runs":
        from gradscope.report import diff_runs_terminal

        return diff_runs_terminal.render(outcome.detail, view)
    if outcome.kind == "diff":
        from gradscope.report import diff_terminal

        return diff_terminal.render(outcome.detail, view)
    from gradscope.report import terminal as inspect_terminal

    return inspect_terminal.render(outcome.detail, view)


def _check_terminal(check: CheckReport, view: View) -> str:
    from gradscope.report import terminal as check_terminal

    return check_terminal.render_check(check, view)
