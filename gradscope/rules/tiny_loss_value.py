"""Why the gradients under Adam's eps are tiny, read from the loss's own value (GS442).

A known loss multiplied by a tiny constant on its way to backward (`loss * 1e-9`) shows
that factor in its graph: its advice is the loss's natural scale. Where no such factor is
known and the loss's own value is itself tiny at every step up to the finding's, the value
was computed tiny: most often an underflow (a plain-domain Sinkhorn's kernel exp(-C/reg)
with reg far below the costs, whose plan underflows to 0; a product of many
probabilities), which no rescaling fixes. No torch.
"""

from __future__ import annotations

import math

from gradscope.fmt import num
from gradscope.steps.records import WatchRun

TINY = 1e-6
"""A loss whose |value| stays below this at every step was computed tiny or scaled far
down: a loss at its natural scale (an error, a cross-entropy, a distance) is far above."""


def computed_tiny(run: WatchRun, index: int, step: int) -> str | None:
    """The advice where the loss's value itself is tiny and no known factor made it so;
    None where a known term's factor explains the scale, or the value is not tiny."""
    kind = run.loss_kind(index)
    if kind is not None and kind.terms:
        factors = [abs(t.factor) for t in kind.terms if math.isfinite(t.factor)]
        if factors and max(factors) <= TINY:
            return None  # a known loss multiplied far down: the scale's advice holds
    losses = [
        abs(r.loss)
        for r in run.steps
        if r.optimizer == index and r.step <= step and r.loss is not None
    ]
    if not losses or not all(math.isfinite(x) for x in losses) or max(losses) > TINY:
        return None
    return (
        f"the loss's own value is tiny (|loss| at most {num(max(losses))} by step {step}), "
        "not multiplied down by a factor its graph shows: unless the script scales it, it "
        "was computed tiny, most often an underflow (a plain-domain Sinkhorn's kernel "
        "exp(-C/reg) with reg far below the costs, its plan gone to 0; a product of many "
        "probabilities): compute it in the log domain (logsumexp; POT's "
        "method='sinkhorn_log'), or raise reg or normalise the cost matrix"
    )
