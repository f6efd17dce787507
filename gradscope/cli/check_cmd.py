"""`gradscope check`: every configured target, one combined report, CI exit codes.

No torch at import time.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from gradscope import config as config_mod
from gradscope.cli import common as clikit
from gradscope.findings import Severity
from gradscope.fmt import duration, printable
from gradscope.gate import baseline as baseline_mod
from gradscope.gate import check as check_mod
from gradscope.outcome import CheckReport, Outcome
from gradscope.report import json as json_report
from gradscope.report import outputs
from gradscope.report.terminal import target_state
from gradscope.report.write import destination, distinct, write_file

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
        baseline_out = destination(write_baseline, "--write-baseline")
        distinct({**where.paths(), "--write-baseline": baseline_out}, {"--baseline": baseline})
        settings = config_mod.load(config, flags={"fail-on": fail_on})
        saved = _baseline(baseline)
        judge = _judge(saved, settings, adopting=bool(baseline_out))
        with clikit.user_stdout_to_stderr(where.to_stdout):
            report = _run_check(settings, judge, bool(baseline_out))
        recorded = sum(len(r.findings) for r in report.results)
        if baseline_out:
            write_file(baseline_out, json_report.dumps(baseline_mod.build(report)))
        report = _judged(report, saved, settings, adopting=bool(baseline_out))
        outputs.deliver(where, report, report.fail_on, width)
        if baseline_out:
            clikit.note(
                f"wrote the baseline {write_baseline}: {recorded} finding(s) recorded; "
                f"gate on it with --baseline {write_baseline}"
            )
        raise typer.Exit(report.exit_code())


def _baseline(path: str | None) -> dict[str, Any] | None:
    """The saved baseline, or None. A baseline file that does not exist yet is a project's
    first run in CI: said once, and every finding is judged."""
    if not path:
        return None
    if not os.path.lexists(path):
        clikit.note(
            f"no baseline {path} yet: every finding is judged; to adopt today's findings, "
            f"run `gradscope check --write-baseline {path}` and commit the file"
        )
        return None
    return baseline_mod.load(path)


def _judged(
    report: CheckReport, saved: dict[str, Any] | None, settings: config_mod.Settings, adopting: bool
) -> CheckReport:
    """The report against the baseline when there is one; when this run writes the
    baseline, with what it found adopted into it (known, as the next run will judge it),
    so every target's state, the verdict and the exit code agree."""
    if saved is not None:
        report = baseline_mod.compare(report, saved, settings)
    if adopting:
        report = baseline_mod.compare(report, baseline_mod.build(report), settings)
    return report


def _judge(
    saved: dict[str, Any] | None, settings: config_mod.Settings, adopting: bool
) -> Callable[[Outcome], Outcome]:
    """One finished target as the verdict will judge it (`_judged`), so its progress line
    tells the same story as the report."""
    return lambda result: _judged(
        CheckReport([result], settings.fail_on), saved, settings, adopting
    ).results[0]


def _run_check(
    settings: config_mod.Settings, judge: Callable[[Outcome], Outcome], adopting: bool
) -> CheckReport:
    """A progress bar on a terminal; in CI (stderr piped) one line per finished target."""
    if sys.stderr.isatty():
        return _with_bar(settings)
    return check_mod.run_isolated(settings, progress=_Lines(settings.fail_on, judge, adopting))


class _Lines:
    def __init__(
        self, fail_on: Severity | None, judge: Callable[[Outcome], Outcome], adopting: bool
    ) -> None:
        self.fail_on = fail_on
        self.judge = judge
        self.known = "adopted into" if adopting else "already in"

    def started(self, index: int, total: int, label: str) -> None:
        pass

    def finished(self, index: int, total: int, result: Outcome) -> None:
        result = self.judge(result)
        known = (
            f", {len(result.known)} finding(s) {self.known} the baseline" if result.known else ""
        )
        clikit.note(
            f"[{index + 1}/{total}] {target_state(result, self.fail_on)} {result.kind} "
            f"{printable(result.label)} ({duration(result.duration_s)}{known})"
        )


def _with_bar(settings: config_mod.Settings) -> CheckReport:
    # a target's label is the user's text: never markup
    columns = (TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("checking", total=None)

        class Bar:
            def started(self, index: int, total: int, label: str) -> None:
                bar.update(task, description=printable(label), completed=index, total=total)

            def finished(self, index: int, total: int, result: Outcome) -> None:
                bar.update(task, completed=index + 1)

        return check_mod.run_isolated(settings, progress=Bar())
