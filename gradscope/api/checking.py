"""`gradscope check` as one function: every configured target run through its command's
API function (one path for the three entry kinds), judged together, against a baseline
or adopted into a new one."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from gradscope import config
from gradscope.api.arguments import settings_or_default
from gradscope.api.gradchecking import gradcheck
from gradscope.api.inspecting import inspect_target
from gradscope.api.options import (
    CheckOptions,
    Given,
    GradcheckOptions,
    InspectOptions,
    WatchOptions,
)
from gradscope.api.watching import watch_script
from gradscope.config import CheckEntry
from gradscope.gate import baseline as baseline_mod
from gradscope.gate import check as gate
from gradscope.gate.check import Progress
from gradscope.outcome import CheckReport, Outcome
from gradscope.report.json import dumps
from gradscope.report.write import destination, write_file

OPTIONS: dict[str, type[Given]] = {
    "inspect": InspectOptions,
    "gradcheck": GradcheckOptions,
    "watch": WatchOptions,
}
"""Each entry kind's options: what its table may set (`from_entry`)."""


def check(
    options: CheckOptions | None = None,
    settings: config.Settings | None = None,
    *,
    progress: Progress | None = None,
    notes: list[str] | None = None,
    isolated: bool = True,
    **given: object,
) -> CheckReport:
    """`gradscope check` without the printing: the settings' [[inspect]], [[gradcheck]]
    and [[watch]] entries, each in a process of its own (`isolated`), judged against
    `options.baseline` and saved to `options.write_baseline` (today's findings adopted).
    `progress` hears of each target as it starts and finishes (judged as the report will
    be); `notes` gets the lines worth saying (no baseline yet, the baseline written)."""

    options = CheckOptions.over(options, given)
    settings = settings_or_default(settings)
    said = notes if notes is not None else []
    out = destination(options.write_baseline, "--write-baseline")
    kinds = {"inspect": settings.inspect, "gradcheck": settings.gradcheck}
    for kind, entries in {**kinds, "watch": settings.watch}.items():
        for entry in entries:  # a wrong value fails before any target runs
            OPTIONS[kind].from_entry(entry)
    saved = _baseline(options.baseline, said)
    judge = _Judging(progress, saved, settings, bool(out))
    run = gate.run_isolated if isolated else gate.run
    report = run(settings, run_entry, judge if progress else None)
    recorded = sum(len(r.findings) for r in report.results)
    if out:
        write_file(out, dumps(baseline_mod.build(report)))
        said.append(
            f"wrote the baseline {options.write_baseline}: {recorded} finding(s) recorded; "
            f"gate on it with --baseline {options.write_baseline}"
        )
    return judged(report, saved, settings, adopting=bool(out))


def run_entry(kind: str, spec: str, entry: CheckEntry, settings: config.Settings) -> Outcome:
    """One entry, by its command's API function, with the options and settings it sets."""
    options: Any = OPTIONS[kind].from_entry(entry)
    own = settings.for_entry(entry)
    if kind == "inspect":
        return inspect_target(spec, options, own).outcome()
    if kind == "gradcheck":
        return gradcheck([spec], options, own).outcome()
    options = replace(options, quiet_stdout=True, label=options.label or spec)
    return watch_script(spec, options=options, settings=own).outcome()


def _baseline(path: str | None, notes: list[str]) -> dict[str, Any] | None:
    """The saved baseline, or None. A baseline file that does not exist yet is a project's
    first run in CI: said once, and every finding is judged."""
    if not path:
        return None
    if not os.path.lexists(path):
        notes.append(
            f"no baseline {path} yet: every finding is judged; to adopt today's findings, "
            f"run `gradscope check --write-baseline {path}` and commit the file"
        )
        return None
    return baseline_mod.load(path)


def judged(
    report: CheckReport, saved: dict[str, Any] | None, settings: config.Settings, adopting: bool
) -> CheckReport:
    """The report against the baseline when there is one; when this run writes the
    baseline, with what it found adopted into it (known, as the next run will judge it),
    so every target's state, the verdict and the exit code agree."""
    if saved is not None:
        report = baseline_mod.compare(report, saved, settings)
    if adopting:
        report = baseline_mod.compare(report, baseline_mod.build(report), settings)
    return report


class _Judging:
    """The progress told of each finished target as the verdict will judge it, so its
    line tells the same story as the report."""

    def __init__(
        self,
        progress: Progress | None,
        saved: dict[str, Any] | None,
        settings: config.Settings,
        adopting: bool,
    ) -> None:
        self.progress, self.saved, self.settings = progress, saved, settings
        self.adopting = adopting

    def started(self, index: int, total: int, label: str) -> None:
        if self.progress is not None:
            self.progress.started(index, total, label)

    def finished(self, index: int, total: int, result: Outcome) -> None:
        alone = CheckReport([result], self.settings.fail_on)
        result = judged(alone, self.saved, self.settings, self.adopting).results[0]
        if self.progress is not None:
            self.progress.finished(index, total, result)
