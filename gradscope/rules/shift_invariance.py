"""A bias whose gradient is exactly 0 while its layer's weight learns: by structure, not a
cut graph (GS413, GS417).

A layer's bias gradient is the sum, over the batch (and positions), of the loss's
gradient at the layer's output; its weight's is that gradient weighted by the inputs. The
first is 0 at every step while the second is not only when the loss does not change as
every output of the layer shifts by one amount: the outputs are subtracted from each other
(a siamese distance, a pairwise ranking score) or normalised after the layer (BatchNorm's
mean). The bias is then redundant, and nothing is cut.
"""

from __future__ import annotations

from dataclasses import replace

from gradscope.findings import Finding, Severity
from gradscope.steps.records import WatchRun


def weight_name(name: str, shape: tuple[int, ...]) -> str | None:
    """The name of the `weight` beside a 1-d `bias` of that name; None for other tensors."""
    if not name.endswith("bias") or len(shape) != 1:
        return None
    return name[: -len("bias")] + "weight"


def sibling_weight(run: WatchRun, i: int) -> int | None:
    """The index of the `weight` of the layer whose `bias` tensor i is, when it requires
    grad; None otherwise."""
    weight = weight_name(run.params[i].name, run.params[i].shape)
    if weight is None:
        return None
    for j, p in enumerate(run.params):
        if p.name == weight and p.requires_grad:
            return j
    return None


def cancelled(run: WatchRun, i: int, optimizer: int | None = None) -> str | None:
    """The layer's weight name when bias i got exactly zero gradients (not None) where
    its weight learned: to the end of the run, or (under `optimizer`) past the bias's
    own last gradient."""
    j = sibling_weight(run, i)
    if j is None or not run.params[i].requires_grad:
        return None
    if optimizer is None:
        ok = run.tensors.ever_had_grad(i) and run.tensors.got_grad(j)
    else:
        bias, weight = run.tensors.learned(optimizer, i), run.tensors.learned(optimizer, j)
        ok = (
            bias is not None
            and weight is not None
            and bias.none_after == 0
            and weight.last > bias.last
        )
    return run.params[j].name if ok else None


def explanation(weight: str, did: str = "learned") -> str:
    return (
        f"while {weight} {did}: the loss does not change when this layer's outputs all "
        "shift by one amount (they are subtracted from each other, as in a siamese "
        "distance or a pairwise ranking score, or normalised after it), so its bias "
        "is redundant and nothing is cut"
    )


def as_information(finding: Finding, head: str, weight: str, did: str = "learned") -> Finding:
    """`finding` said as information: `head` (what the bias got), then why, and that
    nothing needs fixing."""
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{head} {explanation(weight, did)}",
        advice=ADVICE,
    )


ADVICE = (
    "nothing to fix; `bias=False` on that layer drops the redundant parameter (if the "
    "objective should depend on it, check where its outputs are subtracted or normalised)"
)
