"""GS413 told apart: a submodule an installed library builds and its forward never calls,
or calls and drops the output of, or reads only as a Python number.
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
    """GS413 as information on a parameter whose module the library's forward never called,
    or called and its output dropped."""
    if p.read_as_number:
        return _as_number(finding, p)
    if not p.uncalled_in:
        return _as_dropped(finding, p)
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


def _as_number(finding: Finding, p: ParamInfo) -> Finding:
    """GS413 as information on a parameter whose library class reads it only as a Python
    number (normflows' iResBlock draws its Russian-roulette series' length from geom_p's
    and lamb's `.item()`): a setting kept as a parameter, outside every graph by design."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; {p.read_as_number} reads it only as a Python number "
        "(`.item()`): a setting the library keeps as a parameter, outside the loss's graph "
        "by design",
        advice="nothing to fix: it is not meant to learn; to keep the optimizer from holding "
        "it, call requires_grad_(False) on it or pass only the parameters that train",
    )


def _as_dropped(finding: Finding, p: ParamInfo) -> Finding:
    """GS413 as information on a parameter whose module ran with gradients and whose output
    the library's outermost model holding it left out of what it returned (sentence-
    transformers' models.Transformer keeps BertModel's last_hidden_state, not its
    pooler_output): every module holding it is a library's, none the script's own."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; its module ran, and {p.dropped_in}'s output leaves its "
        "output out (every module holding it is a library's, none the script's own: an "
        "output the library drops, as sentence-transformers drops BertModel's pooler_output)",
        advice="nothing to fix if the library's design drops it; to keep the optimizer from "
        "holding it, call requires_grad_(False) on it or build the model without it "
        "(BertModel's add_pooling_layer=False)",
    )
