"""The zero point of a learnable fake quantizer that gets zeros (GS413, GS417). No torch.

torch.ao's `_LearnableFakeQuantize` (LSQ+) learns a scale and a zero point through
`_fake_quantize_learnable_per_tensor_affine`, whose derivative in the zero point is nonzero
only for the inputs that fall outside the quantised range: where the range covers every
input, it is exactly 0. A symmetric weight quantizer even resets its zero point to 0 at each
forward, so its gradient only ever came from a weight clipped at the range's edge (the
observer sets the range to the weights' own extremes; once observers are disabled and the
scale learns, none is). Its zeros are the quantizer's design, not a cut graph.
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.autograd_walk import ZERO_POINT
from gradscope.findings import Finding, Severity
from gradscope.steps.records import ParamInfo


def as_information(finding: Finding, p: ParamInfo, head: str) -> Finding:
    """GS413's or GS417's finding on such a zero point: information; any other, unchanged."""
    if p.flat_op != ZERO_POINT:
        return finding
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{head}: it is {ZERO_POINT} (torch.ao's _LearnableFakeQuantize), whose "
        "gradient comes only from inputs outside the quantised range: none fell outside it "
        "(a symmetric quantizer also resets its zero point to 0 at each forward)",
        advice="nothing to fix: the quantizer's range covers its inputs; a zero point that "
        "should move needs inputs clipped at the range's edge (an asymmetric scheme, a "
        "smaller scale)",
        evidence=(*finding.evidence, f"{p.name} is the zero point of a learnable fake quantizer"),
    )


def stopped(finding: Finding, p: ParamInfo, since: int) -> Finding:
    """GS417's finding on such a zero point: information."""
    return as_information(finding, p, f"{p.name} stopped at step {since}")
