"""The one output path of every command: render an outcome in each requested format,
deliver it, then the CI extras.

Every renderer takes a result and a View and returns text (terminal text is painted by
rich into a string). Only `deliver` writes: to stdout, or atomically to each file the
user named. One run can write several outputs (`plan`): each `-o FILE` takes its format
from its extension (.json, .xml JUnit, .md markdown; any other: --format), `-o -` is
stdout in --format. Besides: on GitHub Actions (GITHUB_ACTIONS=true) findings are also
printed as `::error` / `::warning` annotations, on stdout unless a machine format
occupies stdout (then stderr); when markdown is among the outputs it is appended to
$GITHUB_STEP_SUMMARY as well, once.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from gradscope.errors import GradscopeError
from gradscope.findings import ignored_summary
from gradscope.outcome import CheckReport
from gradscope.report import annotations as ci_annotations
from gradscope.report import junit, layout, markdown, views
from gradscope.report import terminal as check_terminal
from gradscope.report.console import View, paint, view_for
from gradscope.report.json import dumps
from gradscope.report.write import (
    LEDGER,
    NotWritten,
    append_to,
    destination,
    emit,
    to_stdout,
)

if TYPE_CHECKING:  # the CLI imports this module for Format: --help stays cheap
    from gradscope.findings import Severity
    from gradscope.outcome import CheckReport, Outcome


class Format(str, Enum):
    terminal = "terminal"
    json = "json"
    junit = "junit"
    markdown = "markdown"


MARKUP = {Format.json: "json", Format.junit: "xml"}
"""How a format escapes what an ASCII-only stdout cannot write (others: look-alikes)."""

EXTENSIONS = {".json": Format.json, ".xml": Format.junit, ".md": Format.markdown}
"""The formats a file name says; any other extension takes --format."""


@dataclass(frozen=True)
class Destination:
    fmt: Format
    path: str | None
    """An absolute path (checked before any work starts), or None for stdout."""


@dataclass(frozen=True)
class Plan:
    """Where one run's report goes, in which format each: the terminal, JUnit, JSON, ..."""

    destinations: tuple[Destination, ...]

    @property
    def to_stdout(self) -> bool:
        return any(d.path is None for d in self.destinations)

    def paths(self) -> dict[str, str | None]:
        """The files, keyed for `write.distinct` (no two options naming one file)."""
        files = [d.path for d in self.destinations if d.path is not None]
        if len(files) == 1:
            return {"--output": files[0]}
        return {f"--output ({i})": path for i, path in enumerate(files, 1)}

    def without_terminal_on_stdout(self) -> Plan:
        """What a run with nothing to show still writes: every file, every machine format."""
        kept = (d for d in self.destinations if d.path is not None or d.fmt is not Format.terminal)
        return Plan(tuple(kept))

    @property
    def machine_on_stdout(self) -> bool:
        return any(d.path is None and d.fmt is not Format.terminal for d in self.destinations)


def format_of(path: str) -> Format | None:
    """The format a file's extension names, or None."""
    return EXTENSIONS.get(os.path.splitext(path)[1].lower())


def plan(fmt: Format | None, outputs: list[str] | None) -> Plan:
    """The destinations of `--format` and every `-o`, checked before any work starts.

    No -o: stdout in --format (terminal by default). `-o FILE`: the format its extension
    names, else --format. An explicit --format that an extension contradicts, with no
    `-o -` for it to apply to, is one line, exit 2: the user meant one of the two."""

    chosen = fmt or Format.terminal
    names = list(outputs or []) or ["-"]
    out = []
    for name in names:
        if to_stdout(name):
            out.append(Destination(chosen, None))
            continue
        said = format_of(name)
        if said is not None and fmt is not None and said is not fmt and "-" not in names:
            raise GradscopeError(
                f"--format {fmt.value} but -o {name} names {said.value} by its extension: "
                f"drop --format, or name a file that ends as a {fmt.value} report does"
            )
        path = destination(name, "--output")
        assert path is not None
        out.append(Destination(said or chosen, path))
        LEDGER.named[path] = name
    return Plan(tuple(out))


def deliver(
    where: Plan,
    result: Outcome | CheckReport,
    fail_on: Severity | None,
    width: int | None = None,
    top: int | None = 30,
) -> None:
    """Render one command's outcome (or `check`'s several) once per format, deliver each
    (files first, stdout last), then the CI extras (step summary, annotations). An output
    that cannot be written loses no other: NotWritten names each one after the rest."""

    check = result if isinstance(result, CheckReport) else CheckReport([result], fail_on)
    single = None if isinstance(result, CheckReport) else result
    texts: dict[tuple[Format, bool], str] = {}
    failed: list[str] = []
    order = sorted(where.destinations, key=lambda d: d.path is None)
    for d in order:
        key = (d.fmt, d.path is None)  # the terminal text is as wide as where it goes
        if key not in texts:
            texts[key] = render(d.fmt, check, view_for(d.path, width, top), single)
        try:
            emit(texts[key], d.path, MARKUP.get(d.fmt))
        except GradscopeError as exc:  # a full volume, a folder gone: the others still go
            failed.append(str(exc))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    markdown = next((t for (f, _), t in texts.items() if f is Format.markdown), None)
    if markdown is not None and summary:
        append_to(summary, markdown)
    if os.environ.get("GITHUB_ACTIONS") == "true":
        stream = sys.stderr if where.machine_on_stdout else sys.stdout
        stream.write(ci_annotations.render(check))
        stream.flush()
    if failed:
        raise NotWritten(failed, check.exit_code())


def write(
    fmt: Format,
    result: Outcome | CheckReport,
    output: str | None,
    fail_on: Severity | None,
    width: int | None = None,
    top: int | None = 30,
) -> None:
    """One format to one place (`output`, None or "-": stdout): `deliver` of a plan of one."""
    path = None if to_stdout(output) else output
    deliver(Plan((Destination(fmt, path),)), result, fail_on, width, top)


def to_stderr(outcome: Outcome) -> None:
    """The command's terminal report on stderr, for a command whose stdout carries what it
    made (graph's picture)."""
    sys.stderr.write(terminal(outcome, View(color=False)))
    sys.stderr.flush()


def render(fmt: Format, check: CheckReport, view: View, single: Outcome | None = None) -> str:
    """`single`: the outcome of one command (its own terminal report and JSON document);
    None: `gradscope check`'s combined report."""
    if fmt is Format.terminal:
        return terminal(single, view) if single else _check_terminal(check, view)
    if fmt is Format.json:
        return dumps(single.to_dict() if single else check.to_dict())
    if fmt is Format.junit:
        return junit.render(check)

    return markdown.render(check)


def terminal(outcome: Outcome, view: View) -> str:
    """The command's own terminal report, drawn from the result it judged (`detail`), then
    the findings the config silenced, for the views that do not mark them themselves."""

    if outcome.detail is None:
        return ""
    text = views.terminal(outcome.detail, view)
    if outcome.ignored and not views.marks_ignored(outcome.detail):
        said = ignored_summary(outcome.ignored) + " by the config: in --format json, not failing"
        text += paint(lambda console: layout.note(console, said, indent=0), view)
    return text


def _check_terminal(check: CheckReport, view: View) -> str:
    return check_terminal.render_check(check, view)
