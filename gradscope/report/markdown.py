"""Markdown for CI job summaries ($GITHUB_STEP_SUMMARY) and pull-request comments."""

from __future__ import annotations

from gradscope.findings import Finding, Severity, grouped, ignored_summary
from gradscope.fmt import printable
from gradscope.outcome import CheckReport, Outcome

ICON = {"pass": "✅", "fail": "❌", "error": "⚠️"}


def _cell(text: str) -> str:
    """One table cell or line: the user's control characters shown as escapes."""
    return printable(text.replace("|", "\\|").replace("\n", " "))


def _state(r: Outcome, fail_on: Severity | None) -> str:
    return "error" if r.could_not_run else ("fail" if r.failed(fail_on) else "pass")


def render(report: CheckReport) -> str:
    fail_on = report.fail_on
    states = [_state(r, fail_on) for r in report.results]
    lines = [
        "## gradscope",
        "",
        f"{states.count('pass')} passed, {states.count('fail')} failed, "
        f"{states.count('error')} could not run (fail-on: {fail_on or 'never'})",
        "",
        "| | target | check | findings | time |",
        "|---|---|---|---|---|",
    ]
    for r, state in zip(report.results, states, strict=True):
        counts = ", ".join(f"{n} {s}" for s, n in _counts(r).items() if n) or "none"
        lines.append(
            f"| {ICON[state]} | `{_cell(r.label)}` | {r.kind} | {counts} | {r.duration_s:.2f} s |"
        )
    for r in report.results:
        if r.could_not_run:
            lines += ["", f"### `{r.label}`: could not run", "", _cell(r.could_not_run)]
        elif r.findings or r.known:
            lines += [
                "",
                f"### `{r.label}`",
                "",
                "| severity | rule | subject | message |",
                "|---|---|---|---|",
            ]
            lines += [_row(g, "") for g in grouped(r.findings)]
            lines += [_row(g, " (in baseline)") for g in grouped(r.known)]
        if r.ignored:
            lines += ["", _cell(ignored_summary(r.ignored))]
    return "\n".join(lines) + "\n"


def _row(group: list[Finding], note: str) -> str:
    """One row per problem, as the terminal groups them: every subject, one message."""
    f = group[0]
    subjects = ", ".join(f"`{_cell(g.subject)}`" for g in group[:20])
    if len(group) > 20:
        subjects += f", ... (+{len(group) - 20} more)"
    message = _cell(f.message if len(group) == 1 else f"{len(group)} subjects, e.g. {f.message}")
    evidence = "".join(f"<br>evidence: {_cell(e)}" for e in f.evidence)
    return (
        f"| {f.severity}{note} | {f.rule} {f.slug} | {subjects} | {message}{evidence}"
        f"<br>advice: {_cell(f.advice)} |"
    )


def _counts(r: Outcome) -> dict[str, int]:
    out = {str(s): 0 for s in sorted(Severity, reverse=True)}
    for f in r.findings:
        out[str(f.severity)] += 1
    if r.known:
        out["known"] = len(r.known)
    return out
