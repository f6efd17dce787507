"""A gradcheck result as findings (GS201-GS203), judged like every other command's:
`gradscope gradcheck` and a `[[gradcheck]]` target of `gradscope check` give one verdict."""

from __future__ import annotations

from gradscope.config import CheckEntry, Settings
from gradscope.findings import RULES, Finding
from gradscope.gradcheck.results import GradcheckReport
from gradscope.outcome import Outcome


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


def outcome(report: GradcheckReport, settings: Settings) -> Outcome:
    """The findings under the user's severities and ignores; a Function whose check failed
    always has a finding, so no severity setting can turn a wrong gradient into silence
    without it being shown (as ignored)."""
    label = " ".join(t.spec for t in report.targets)
    return Outcome(
        "gradcheck",
        label,
        settings.judged(findings(report)),
        document=report.to_dict(),
        duration_s=sum(t.duration_s for t in report.targets),
        detail=report,
    )


def check_entry(entry: CheckEntry, spec: str, settings: Settings) -> Outcome:
    """Run one [[gradcheck]] entry; GradscopeError (bad spec or options) propagates."""
    from gradscope.gradcheck import options_for, run

    return outcome(run([(spec, options_for(entry))]), settings)
