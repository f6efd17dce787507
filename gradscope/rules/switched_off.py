"""All-zero gradients of parameters the loss reaches only through a term whose weight is 0
at this step (stats.weighted_off): a schedule that turns the term on later (VQGAN's GAN loss
before its discriminator starts, a KL warm-up from 0), told as information, not as a dead
layer; the same for a term held at a clamp's bound (stats.clamped_off)."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity

ADVICE = (
    "nothing to fix if the weight is scheduled to turn the term on later (`gradscope watch` "
    "follows the steps after it); if the term should count now, check the weight it is "
    "multiplied by"
)


def as_information(finding: Finding, name: str) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"grad of {name} is all zeros: the loss reaches it only through a term multiplied "
            "by 0 at this step (a loss weight that is off, as a warm-up's before it turns the "
            "term on)"
        ),
        advice=ADVICE,
    )


CLAMPED_ADVICE = (
    "nothing to fix if the bound is a floor by design (free nats hold the KL there until it "
    "rises above them; `gradscope watch` follows the steps after it); if the term should "
    "train now, its input sits beyond the clamp's bound at every element"
)


def as_held_at_floor(finding: Finding, name: str, steps: int) -> Finding:
    """GS413 over a run: only zero gradients, and the first losses read reach it only
    through a clamp at its bound (a KL at its free-nats floor the run ended under)."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"{name} got only zero gradients in all {steps} steps: the loss reaches it only "
            "through a clamp (or a max) whose input was beyond its bound at every element in "
            "the first steps, so it passes no gradient (a KL under its free-nats floor, "
            "torch.clamp(kl, min=free_nats)); the run ended before the term rose above it"
        ),
        advice=CLAMPED_ADVICE,
    )


def as_clamped(finding: Finding, name: str) -> Finding:
    """All zeros behind a clamp (a max, a min) whose input is beyond its bound everywhere."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"grad of {name} is all zeros: the loss reaches it only through a clamp (or a max) "
            "whose input is beyond its bound at every element at this step, so it passes no "
            "gradient (a KL at its free-nats floor, torch.clamp(kl, min=free_nats))"
        ),
        advice=CLAMPED_ADVICE,
    )
