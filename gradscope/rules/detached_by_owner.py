"""GS101 as information for a parameter that its own module's forward reads only through
`.detach()`: the module's author stops this loss's gradient there on purpose, for a tensor
another loss trains (CompressAI's entropy bottleneck detaches its quantiles' medians; its
aux loss, stepped by an optimizer of its own, fits them). `inspect` sees one loss, not the
other: the missing gradient is information, not a cut to remove."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity

DETACH_CUT = ".detach(): "
"""How the explanation pass names a cut by `.detach()` (inspector/replay.py)."""


def read_detached(subject: str, cuts: list[str]) -> bool:
    """Every cut the explanation pass found for parameter `subject` is a `.detach()` at an op
    of its own module (evidence lines "graph cut by <site>; <site>")."""
    module = subject.rpartition(".")[0]
    sites = [s for e in cuts for s in e.removeprefix("graph cut by ").split("; ")]
    if not module or not sites or not all(s.startswith(DETACH_CUT) for s in sites):
        return False
    return all(s.endswith(f" in `{module}`") for s in sites)


def as_inspected(finding: Finding) -> Finding:
    """GS101 as information on a parameter its own module detaches."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message.split(': ', 1)[0]}: its own module's forward reads it only "
        "through .detach(), so this loss does not train it, on purpose",
        advice="fine where another loss trains it (an auxiliary loss with its own optimizer, "
        "as CompressAI's aux_loss fits the entropy bottleneck's quantiles): watch the run to "
        "see that loss reach it; if this loss should train it, remove that .detach()",
    )
