"""`gradscope check`: every configured target, one combined report, CI exit codes.

No torch at import time.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from gradscope import api
from gradscope import config as config_mod
from gradscope.cli import common as clikit
from gradscope.findings import Severity
from gradscope.fmt import duration, printable
from gradscope.outcome import Outcome
from gradscope.report import outputs
from gradscope.report.terminal import target_state
from gradscope.report.write import destination, distinct

BaselineOpt = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        metavar="FILE",
        help="Fail only on findings not in this baseline, or "
        "on gradient norms that changed by more than baseline-factor. A FILE that does "
        "not exist yet: every finding is judged (a project's first run).",
    ),
]

WriteBaselineOpt = Annotated[
    str | None,
    typer.Option("--write-baseline", metavar="FILE", help="Save this run as a baseline."),
]

# the --help text (as a docstring it would make the function too long to read)
HELP = """Run every target configured in [tool.gradscope] (or --config): one combined report.

Examples:

  gradscope check

  gradscope check -o - -o gradscope.xml -o report.json

  gradscope check --write-baseline .gradscope-baseline.json

  gradscope check --baseline .gradscope-baseline.json --format markdown

"""


def check(
    format: clikit.FormatOpt = None,
    output: clikit.OutputOpt = None,
    fail_on: clikit.FailOnOpt = None,
    config: clikit.ConfigOpt = None,
    baseline: BaselineOpt = None,
    write_baseline: WriteBaselineOpt = None,
    width: clikit.WidthOpt = None,
    debug: clikit.DebugOpt = False,
) -> None:
    """Every configured target, one combined report (HELP is the --help)."""
    with clikit.guarded(debug):
        where = outputs.plan(format, output)
        options = clikit.options_from(api.CheckOptions, locals())
        baseline_out = destination(write_baseline, "--write-baseline")
        distinct({**where.paths(), "--write-baseline": baseline_out}, {"--baseline": baseline})
        settings = config_mod.load(config, flags={"fail-on": fail_on})
        notes: list[str] = []
        adopting = bool(write_baseline)
        with clikit.user_stdout_to_stderr(where.to_stdout), _progress(settings, adopting) as told:
            report = api.check(options, settings, progress=told, notes=notes)
        outputs.deliver(where, report, report.fail_on, width)
        for line in notes:
            clikit.note(line)
        raise typer.Exit(report.exit_code())


@contextmanager
def _progress(settings: config_mod.Settings, adopting: bool) -> Iterator[Any]:
    """A progress bar on a terminal; in CI (stderr piped) one line per finished target."""
    if not sys.stderr.isatty():
        yield _Lines(settings.fail_on, adopting)
        return
    # a target's label is the user's text: never markup
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        yield _Bar(bar, bar.add_task("checking", total=None))


class _Lines:
    def __init__(self, fail_on: Severity | None, adopting: bool) -> None:
        self.fail_on = fail_on
        self.known = "adopted into" if adopting else "already in"

    def started(self, index: int, total: int, label: str) -> None:
        pass

    def finished(self, index: int, total: int, result: Outcome) -> None:
        known = (
            f", {len(result.known)} finding(s) {self.known} the baseline" if result.known else ""
        )
        clikit.note(
            f"[{index + 1}/{total}] {target_state(result, self.fail_on)} {result.kind} "
            f"{printable(result.label)} ({duration(result.duration_s)}{known})"
        )


class _Bar:
    def __init__(self, bar: Progress, task: Any) -> None:
        self.bar, self.task = bar, task

    def started(self, index: int, total: int, label: str) -> None:
        self.bar.update(self.task, description=printable(label), completed=index, total=total)

    def finished(self, index: int, total: int, result: Outcome) -> None:
        self.bar.update(self.task, completed=index + 1)
