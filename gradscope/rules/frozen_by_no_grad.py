"""GS413 told apart: a parameter whose module ran every forward inside torch.no_grad().
The block freezes it on purpose (fairseq's feature encoder under feature_grad_mult=0, an
encoder held for its first freeze_finetune_updates): it gets no gradient by design, and an
optimizer skips a parameter whose .grad is None, so keeping it in one changes nothing.
Information that names the block. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import ParamInfo


def as_information(finding: Finding, p: ParamInfo) -> Finding:
    """GS413 as information on a parameter frozen by the no_grad block around its module."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; its module ran every forward inside torch.no_grad() "
        "(or inference_mode): frozen by that block, and the optimizer skips it while its "
        ".grad is None",
        advice="fine if it is meant to stay frozen: call requires_grad_(False) on it and "
        "leave it out of the optimizer to say so; if it should learn, run its forward with "
        "gradients on (a freeze_finetune_updates or feature_grad_mult=0 setting holds it)",
    )
