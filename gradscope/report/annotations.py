"""GitHub Actions workflow commands (`::error ...::`), shown inline on the pull request."""

from __future__ import annotations

from gradscope.findings import Severity
from gradscope.outcome import CheckReport

LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def render(report: CheckReport) -> str:
    lines = []
    for r in report.results:
        where = f"file={_escape(r.file, True)}," if r.file else ""
        if r.could_not_run:
            lines.append(
                f"::error {where}title=gradscope could not run "
                f"{_escape(r.label, True)}::{_escape(r.could_not_run)}"
            )
        for f in r.findings:
            title = _escape(f"gradscope {f.rule} {f.slug} in {r.label}", True)
            lines.append(
                f"::{LEVEL[f.severity]} {where}title={title}::"
                f"{_escape(f.message + ' — ' + f.advice)}"
            )
    return "".join(line + "\n" for line in lines)
