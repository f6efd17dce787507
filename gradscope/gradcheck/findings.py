"""A gradcheck result as findings, so `gradscope check` gates and reports it like inspect."""

from __future__ import annotations

from typing import Any

from gradscope.config import CheckEntry, Settings
from gradscope.findings import RULES, Finding, with_settings
from gradscope.gradcheck.results import GradcheckReport


def findings(report: GradcheckReport) -> list[Finding]:
    out = []
    for t in report.targets:
        for f in t.failures:
            worst = tuple(
                f"d {f.output}{list(e.output_index)} / d {f.input.name}"
                f"{list(e.input_index)}: analytical {e.analytical:.4g}, numerical "
                f"{e.numerical:.4g}"
                for e in f.worst[:3]
            )
            out.append(
                RULES["GS201"].finding(
                    f"{t.spec}: {f.input.label} -> {f.output}",
                    f"{f.check}: gradient of {f.output} with respect to {f.input.label} is wrong "
                    f"(max abs error {f.max_abs_error:.3g}): {f.diagnosis.slug}",
                    f.diagnosis.message,
                    f.max_abs_error,
                    t.tolerance.get("atol"),
                    worst,
                )
            )
        for e in t.errors:
            where = f" at {e.location}" if e.location else ""
            out.append(
                RULES["GS202"].finding(
                    f"{t.spec}: {e.stage}",
                    f"{e.check}: {e.stage} raised{where}: {e.message}",
                    e.diagnosis.message,
                )
            )
        for n in t.notes:
            out.append(
                RULES["GS203"].finding(
                    f"{t.spec}: {n.slug}", n.message, "see docs/gradcheck.md for this caveat"
                )
            )
    return out


def check_entry(
    entry: CheckEntry, spec: str, settings: Settings
) -> tuple[list[Finding], dict[str, Any]]:
    """Run one [[gradcheck]] entry; GradscopeError (bad spec or options) propagates."""
    from gradscope.gradcheck import options_for, run

    report = run([(spec, options_for(entry))])
    return with_settings(findings(report), settings), report.to_dict()
