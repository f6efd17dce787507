"""GS413 told apart: a submodule an installed library builds and its forward never calls.
MONAI's TransformerBlock (monai/networks/blocks/transformerblock.py) builds
norm_cross_attn whatever with_cross_attention says and calls it only when that is True,
so every UNETR or ViT trained without cross-attention carries LayerNorms that never run.
Nothing the user wrote cut them out of the loss: information that names the library's
class. A layer the user's own forward defines and never calls stays a warning. No torch."""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import ParamInfo


def as_information(finding: Finding, p: ParamInfo) -> Finding:
    """GS413 as information on a parameter whose module the library's forward never called."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; its module never ran: {p.uncalled_in}'s forward ran "
        "with gradients and never called it (a submodule the library builds and this "
        "configuration leaves unused)",
        advice="nothing to fix if that option is off on purpose; to keep the optimizer from "
        "holding it, call requires_grad_(False) on it or pass only the parameters that "
        "train; if the option was meant to be on, check the model's arguments",
    )
