"""JUnit XML for CI dashboards: one test case per configured target.

A target with findings at or above --fail-on is a <failure> carrying their
text; one that could not run is an <error>; lower findings go to <system-out>.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gradscope.findings import Finding, Severity, grouped, ignored_summary, subjects_text
from gradscope.outcome import CheckReport, Outcome


def _text(findings: list[Finding]) -> str:
    """Grouped as in the terminal report: one paragraph per problem, all its subjects."""
    lines = []
    for group in grouped(findings):
        f = group[0]
        if len(group) == 1:
            lines.append(f"{f.severity} {f.rule} {f.slug} {f.subject}: {f.message}")
        else:
            lines.append(
                f"{f.severity} {f.rule} {f.slug} {len(group)} subjects: {subjects_text(group, 20)}"
            )
            lines.append(f"    e.g. {f.message}")
        lines.extend(f"    evidence: {e}" for e in f.evidence)
        lines.append(f"    advice: {f.advice}")
    return "\n".join(lines)


def _case(suite: ET.Element, r: Outcome, fail_on: Severity | None) -> None:
    """One target's testcase: an error where it could not run, a failure for the findings
    at or above fail_on, the rest (and what was ignored) as its output."""
    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"gradscope.{r.kind}",
        name=r.label,
        time=f"{r.duration_s:.3f}",
    )
    if r.file:
        case.set("file", r.file)
    failing = [f for f in r.findings if fail_on is not None and f.severity >= fail_on]
    rest = [f for f in r.findings if f not in failing] + r.known
    if r.could_not_run is not None:
        why = r.could_not_run
        ET.SubElement(case, "error", message=why, type="could-not-run").text = why
    elif failing:
        first = failing[0]
        el = ET.SubElement(
            case,
            "failure",
            type=first.rule,
            message=f"{len(failing)} finding(s) at or above {fail_on}: {first.message}",
        )
        el.text = _text(failing)
    out = [_text(rest)] if rest else []
    if r.ignored:
        out.append(ignored_summary(r.ignored))
    if out:
        ET.SubElement(case, "system-out").text = "\n".join(out)


def render(report: CheckReport) -> str:
    fail_on = report.fail_on
    failures = sum(r.failed(fail_on) for r in report.results)
    errors = sum(r.could_not_run is not None for r in report.results)
    total = sum(r.duration_s for r in report.results)
    suites = ET.Element(
        "testsuites",
        name="gradscope",
        tests=str(len(report.results)),
        failures=str(failures),
        errors=str(errors),
        time=f"{total:.3f}",
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="gradscope",
        tests=str(len(report.results)),
        failures=str(failures),
        errors=str(errors),
        skipped="0",
        time=f"{total:.3f}",
    )
    for r in report.results:
        _case(suite, r, fail_on)
    _xml_safe(suites)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_safe(root: ET.Element) -> None:
    """Characters XML 1.0 cannot hold (NUL, other control characters, lone surrogates),
    from the user's errors and names, shown as escapes so the report stays parseable."""

    def safe(text: str) -> str:
        return _NOT_XML.sub(lambda m: repr(m.group())[1:-1], text)

    for el in root.iter():
        if el.text:
            el.text = safe(el.text)
        for key, value in el.attrib.items():
            el.set(key, safe(value))
