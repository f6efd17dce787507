"""GS435 where every wiped step's `.grad` was assigned a new tensor after its last backward
call: simulated workers (signSGD's majority vote, a compressed all-reduce written by hand)
each run a backward, their gradient is read and reset, and the combination is written into
`.grad`; a reset inside an accumulation loop followed by the last micro-batch's gradient
rewritten (compressed into a new tensor) gives the same order of calls. Information that
names both. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity

ADVICE = (
    "nothing to fix if the script reads each call's gradient before the reset and writes "
    "their combination (simulated workers: a majority vote of their signs, an average of "
    "their compressed gradients); if the gradient written is built from the last call's "
    "alone, the earlier micro-batches are lost: reset once per step, before the "
    "accumulation loop"
)


def as_information(finding: Finding, reset: str, lost: float) -> Finding:
    """The wipe finding, said as the two readings the evidence leaves: `reset` says where
    and how often, `lost` how many calls a rewrite of the last one's gradient would lose."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{reset}, and at each of them .grad was assigned a new tensor after the "
        "last backward call: the script wrote the step's gradient itself, a combination of "
        "what every call left (each read before the next reset) or, if built from the last "
        f"call's alone, an update that lost the first {lost:g}",
        advice=ADVICE,
    )
