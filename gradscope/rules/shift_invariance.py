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

WEIGHT_TENSORS = (
    "weight",
    "weight_orig",  # spectral_norm's hook (torch.nn.utils.spectral_norm)
    "parametrizations.weight.original",  # a parametrization: spectral_norm, orthogonal
    "parametrizations.weight.original1",  # parametrizations.weight_norm's direction
    "weight_v",  # weight_norm's hook
)
"""Where a layer keeps the tensor its weight is made of: itself, or what a
parametrization or a norm's hook trains in its place."""


def weight_names(name: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    """The names the trained tensor of the `weight` beside a 1-d `bias` of that name may
    have (the weight, or its parametrization's original); () for other tensors."""
    if not name.endswith("bias") or len(shape) != 1:
        return ()
    return tuple(name[: -len("bias")] + w for w in WEIGHT_TENSORS)


def weight_among(name: str, shape: tuple[int, ...], names: set[str]) -> str | None:
    """The name, among `names`, of the weight beside bias `name`; None if none is there."""
    return next((w for w in weight_names(name, shape) if w in names), None)


def sibling_weight(run: WatchRun, i: int) -> int | None:
    """The index of the `weight` of the layer whose `bias` tensor i is (or of the tensor its
    parametrization trains), when it requires grad; None otherwise."""
    trained = {p.name: j for j, p in enumerate(run.params) if p.requires_grad}
    weight = weight_among(run.params[i].name, run.params[i].shape, set(trained))
    return None if weight is None else trained[weight]


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
        "distance, a pairwise ranking score or an energy's positive minus negative phase, "
        "or normalised after it), so its bias is redundant and nothing is cut"
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
