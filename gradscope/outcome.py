"""What every command ends with, and the one rule that turns it into an exit code.

Each command's own result (inspect's `Report`, watch's `WatchReport`, gradcheck's
`GradcheckReport`, diff's `DiffResult` and `RunsDiff`, graph's `GraphResult`) is a
`Result`: it says what it found in its own terms (`body()`, the JSON below the header)
and its `outcome()` gives the same facts in the shape every output takes: an `Outcome`,
which writes the header every document shares once. A CI gate (`gradscope check`) is a
list of them. The terminal renderer of a result reads `detail`; everything else (JSON,
JUnit, markdown, annotations, the exit code) reads the rest. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gradscope.errors import ExitCode
from gradscope.findings import Finding, Severity, split_ignored

SCHEMA_VERSION = 1
"""The `version` of every document (docs/json-schema.md)."""


class Result(Protocol):
    """What a command found, in its own terms. Its terminal view is drawn by the writer
    (report/views.py): results sit below the writer and never import it."""

    def body(self) -> dict[str, Any]:
        """The command's JSON document without the header (version, tool, kind, label,
        findings, ignored), which `Outcome.to_dict` writes."""
        ...

    def outcome(self) -> Outcome:
        """The same facts in the shape every output takes."""
        ...


@dataclass
class Outcome:
    """One judged target: what was found, what was silenced, or why it could not run."""

    kind: str
    """Which command judged it: "inspect", "watch", "gradcheck", "diff" or "graph"."""
    label: str
    """What was judged, as the user named it: a target, a script, "ref.py vs new.py"."""
    findings: list[Finding] = field(default_factory=list)
    """Findings that count against --fail-on."""
    ignored: list[Finding] = field(default_factory=list)
    """Findings an `ignore` pattern silenced: shown and counted, never failing."""
    known: list[Finding] = field(default_factory=list)
    """Findings already in `check`'s baseline: shown, never failing."""
    could_not_run: str | None = None
    """Why nothing (or not everything) could be judged: the target failed to load, the
    script crashed, no step was seen. Such an outcome is exit 2, never a pass."""
    stopped_by: ExitCode | None = None
    """Ctrl-C (INTERRUPTED) or SIGTERM (TERMINATED) ended the run: that is the exit code."""
    document: dict[str, Any] | None = None
    """The body of the command's document (`detail.body()` when not given), kept as data:
    `check` sends its targets' outcomes from worker processes without their results."""
    duration_s: float = 0.0
    file: str | None = None
    """The user's file behind the target, for CI annotations."""
    detail: Result | None = field(default=None, compare=False, repr=False)
    """The command's own result: its terminal view and its document's body (None: a
    target that could not load, with nothing of its own to say)."""
    title: str | None = None
    """The document's label where it says more than `label` (watch: "script train.py")."""
    unwritten: list[str] = field(default_factory=list)
    """What was asked for and could not be written (a plot, a --log, a report file), one
    line each: the rest of the outputs are, and the exit code is 2."""

    def __post_init__(self) -> None:
        active, ignored = split_ignored(self.findings)
        self.findings, self.ignored = active, self.ignored + ignored
        if self.document is None and self.detail is not None:
            self.document = self.detail.body()

    def failed(self, fail_on: Severity | None) -> bool:
        """A finding at or above `fail_on` (None: never) in an outcome that ran."""
        return (
            self.could_not_run is None
            and fail_on is not None
            and any(f.severity >= fail_on for f in self.findings)
        )

    def to_dict(self) -> dict[str, Any]:
        """The command's document: the header (version, tool, kind, label, and the
        findings as judged under the user's settings), then the result's body."""
        return {
            "version": SCHEMA_VERSION,
            "tool": "gradscope",
            "kind": self.kind,
            "label": self.title or self.label,
            "findings": [f.to_dict() for f in self.findings],
            "ignored": [f.to_dict() for f in self.ignored],
            **(self.document or {}),
        }


def exit_code(
    outcomes: list[Outcome], fail_on: Severity | None, adopting: bool = False
) -> ExitCode:
    """The exit code of every command, from its outcomes: 130/143 when Ctrl-C or SIGTERM
    ended a run (3 when gradscope's own failure did), 2 when something could not run or
    a file asked for could not be written, 1 on a finding at --fail-on (unless `adopting`
    a baseline, which records findings instead of judging them), else 0."""
    stopped = [o.stopped_by for o in outcomes if o.stopped_by is not None]
    if stopped:
        return stopped[0]
    if any(o.could_not_run is not None or o.unwritten for o in outcomes):
        return ExitCode.ERROR
    if not adopting and any(o.failed(fail_on) for o in outcomes):
        return ExitCode.FINDINGS
    return ExitCode.OK


@dataclass
class CheckReport:
    """The outcomes a CI gate judged together (`gradscope check`), or the one outcome of
    another command on its way to the CI formats."""

    results: list[Outcome]
    fail_on: Severity | None
    adopting: bool = False
    """`check --write-baseline`: today's findings are being recorded as known, which
    succeeds; only a target that could not run still fails it."""

    def exit_code(self) -> ExitCode:
        return exit_code(self.results, self.fail_on, self.adopting)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": SCHEMA_VERSION,
            "tool": "gradscope",
            "kind": "check",
            "fail_on": str(self.fail_on) if self.fail_on else "never",
            "exit_code": int(self.exit_code()),
            "results": [
                {
                    "kind": r.kind,
                    "target": r.label,
                    "error": r.could_not_run,
                    "passed": r.could_not_run is None
                    and not r.unwritten
                    and not r.failed(self.fail_on),
                    "duration_s": round(r.duration_s, 6),
                    "findings": [f.to_dict() for f in r.findings],
                    "known": [f.to_dict() for f in r.known],
                    "ignored": [f.to_dict() for f in r.ignored],
                    "document": r.document,
                }
                for r in self.results
            ],
        }
