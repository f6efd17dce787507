"""A parameter with no gradient because its layer was skipped at random this step (LayerDrop:
stats.skipped_at_random): its siblings of the same kind ran, and it trains at the steps that
draw it in. Information, not a module that forward never calls."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.rules.params import ancestors
from gradscope.stats import RunStats


def skipped(stats: RunStats, module: str) -> str | None:
    """The layer, `module` or one above it, that its parent skipped at random."""
    return next((m for m in ancestors(module) if m in stats.skipped_at_random), None)


def as_information(finding: Finding, name: str, layer: str) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"grad of {name} is None: its layer `{layer}` was skipped at random in "
            "this step's forward (its parent's forward draws a random number in training and "
            "skips the layer, as LayerDrop does), while the layers beside it of its kind ran"
        ),
        advice=(
            "nothing to fix: it trains at the steps that draw it in (`gradscope watch` follows "
            "them); if no layer should be skipped, check the skip's probability"
        ),
    )
