"""GS413 as information on a layer after one whose output a forward hook reads (a
self-supervised wrapper's representation layer): a head trained later, on that output."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity


def as_information(finding: Finding, read_out: str) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; it comes after {read_out}, whose output a "
        "forward hook reads (a self-supervised wrapper's representation layer)",
        advice="fine if meant (a head trained later, on the representation); "
        "requires_grad_(False) on it says so; if the loss should reach it, check what "
        "the hook's reader does with its output",
    )
