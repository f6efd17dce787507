"""Parameters their module set in place from the batch during the measured forward (a
data-dependent initialisation: Glow's ActNorm, a data-init weight norm): the backward takes
their gradient at the point the batch just set (ActNorm's shift removes the batch's mean, so
the loss is at its minimum in it), and a tiny or zero gradient there is no gradient that
failed to reach them."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.stats import RunStats

ADVICE = (
    "nothing to fix: a data-dependent initialisation sets it from the first batch; "
    "`gradscope inspect --script train.py --step 2` shows its gradient after it"
)


def names(stats: RunStats) -> set[str]:
    return set(stats.set_in_forward)


def as_information(finding: Finding, name: str) -> Finding:
    """`finding` on `name` said as information: why its gradient is small at this step."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{finding.message}: {name} was set in place by its module during this forward "
            "(a data-dependent initialisation from this batch), so its gradient is taken at "
            "the point this batch sets, near a minimum of the loss by construction"
        ),
        advice=ADVICE,
    )
