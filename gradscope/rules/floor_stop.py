"""Parameters that stopped learning below a floor on a loss term (GS417, GS405). No torch.

Dreamer's free bits (`torch.clamp(kl, min=1.0)`, `torch.maximum(kl, free_nats)`) hold the KL's
gradient at exactly 0 while the KL sits under the floor: a learned prior reached only through
that term gets zeros from the step the KL falls under it, by design, and learns again when it
rises above. Its zeros are the floor's, not a freeze, a cut graph or dead units: information. A
tensor that got None (frozen, or cut from the loss) stays a warning, and so does a module whose
norm only shrank."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.rules.switched_off import CLAMPED_ADVICE
from gradscope.steps.records import ParamInfo
from gradscope.steps.tensor_track import Learned


def stopped(finding: Finding, p: ParamInfo, had: Learned) -> Finding:
    """GS417's finding on a trainable tensor below a floor on a loss term in the graphs read,
    whose gradients since were all zeros (never None): information."""
    if not (p.below_floor and p.requires_grad) or had.none_after or not had.zero_after:
        return finding
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{finding.message}: the loss reaches {p.name} through a floor on a loss term (a "
            "KL's free bits, torch.clamp(kl, min=free_nats)), which passes exactly 0 while the "
            "term sits under it"
        ),
        advice=CLAMPED_ADVICE,
    )


def vanished(held: list[ParamInfo], last: float, finding: Finding) -> Finding:
    """GS405's finding on a module whose late gradient norm is exactly 0 and whose tensors all
    sit below a floor on a loss term: the term fell under its floor, information."""
    if last != 0 or not held or not all(p.below_floor and p.requires_grad for p in held):
        return finding
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{finding.message}: the loss reaches it through a floor on a loss term (a "
            "KL's free bits, torch.clamp(kl, min=free_nats)), which passes exactly 0 while the "
            "term sits under it"
        ),
        advice=CLAMPED_ADVICE,
    )
