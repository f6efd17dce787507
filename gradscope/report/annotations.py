"""GitHub Actions workflow commands (`::error ...::`), shown inline on the pull request.

One annotation per problem, grouped as every report groups findings (the two None
gradients of one unused module are one problem), on the line of the user's code that
the finding's evidence names (`at model.py:14`), else on the target's file.
"""

from __future__ import annotations

import re

from gradscope.findings import Finding, Severity, grouped, subjects_text
from gradscope.outcome import CheckReport, Outcome

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}

WHERE = re.compile(r"(?<![\w./\\-])((?:[A-Za-z]:)?[^\s`'\"(),:]+\.py):(\d+)\b")
"""`path/to/file.py:14` in a finding's text, as `errors.user_line` writes it."""


def _escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def location(texts: tuple[str, ...], fallback: str | None) -> tuple[str | None, int | None]:
    """The file and line the first `file.py:N` of `texts` names; else `fallback` (the
    target's file), without a line."""
    for text in texts:
        found = WHERE.search(text)
        if found:
            return found.group(1), int(found.group(2))
    return fallback, None


def _where(path: str | None, line: int | None) -> str:
    return (f"file={_escape(path, True)}," if path else "") + (
        f"line={line}," if path and line is not None else ""
    )


def _annotation(r: Outcome, group: list[Finding]) -> str:
    f = group[0]
    where = _where(*location((*f.evidence, f.message), r.file))
    title = _escape(f"gradscope {f.rule} {f.slug} in {r.label}", True)
    if len(group) == 1:
        text = f.message
    else:
        text = f"{len(group)} subjects: {subjects_text(group)}; e.g. {f.message}"
    return f"::{LEVEL[f.severity]} {where}title={title}::{_escape(text + ' — ' + f.advice)}"


def render(report: CheckReport) -> str:
    lines = []
    for r in report.results:
        if r.could_not_run:
            where = _where(*location((r.could_not_run,), r.file))
            lines.append(
                f"::error {where}title=gradscope could not run "
                f"{_escape(r.label, True)}::{_escape(r.could_not_run)}"
            )
        lines += [_annotation(r, group) for group in grouped(r.findings)]
    return "".join(line + "\n" for line in lines)
