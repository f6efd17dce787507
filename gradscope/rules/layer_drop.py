"""A parameter with no gradient because its layer was skipped at random this step (LayerDrop:
stats.skipped_at_random): its siblings of the same kind ran, and it trains at the steps that
draw it in. Information, not a module that forward never calls. So is a supernet's
candidate that this step's sampled path did not pick (stats.picked_choices)."""

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
            "this step's forward (a forward draws a random number in training and skips the "
            "layer, as LayerDrop and stochastic depth do), while the layers beside it of its "
            "kind ran"
        ),
        advice=(
            "nothing to fix: it trains at the steps that draw it in (`gradscope watch` follows "
            "them); if no layer should be skipped, check the skip's probability"
        ),
    )


def unpicked(stats: RunStats, module: str) -> str | None:
    """The candidate, `module` or one above it, that this step's path did not pick."""
    return next((m for m in ancestors(module) if m in stats.picked_choices), None)


def as_unpicked(finding: Finding, name: str, choice: str) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        message=(
            f"grad of {name} is None: `{choice}` is one of the alike candidates of its list, "
            "of which this step's forward ran one, called by an index picked at run time (a "
            "one-shot supernet's sampled path, a slimmable network's BatchNorm for the width "
            "it runs)"
        ),
        advice=(
            "nothing to fix if the path is sampled on purpose: it trains at the steps that "
            "pick it (`gradscope watch` names a candidate never picked over the run)"
        ),
    )


def left_out_by_design(stats: RunStats, finding: Finding, name: str, module: str) -> Finding:
    """GS101 for a module that did not run, told as information where its layer was skipped
    at random or its candidate not picked this step; else as it was."""
    layer = skipped(stats, module)
    if layer is not None:
        return as_information(finding, name, layer)
    choice = unpicked(stats, module)
    return finding if choice is None else as_unpicked(finding, name, choice)
