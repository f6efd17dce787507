"""What the per-run rules read of a parameter: which ones train, which gradients compare,
RMS values, the module tree by name. No torch.
"""

from __future__ import annotations

from collections.abc import Iterator

from gradscope.stats import ParamStats, RunStats


def trainable(stats: RunStats) -> list[ParamStats]:
    """The parameters with requires_grad=True: the ones a gradient is expected for."""
    return [p for p in stats.params if p.requires_grad]


def comparable(stats: RunStats) -> list[ParamStats]:
    """Parameters with a finite, non-zero gradient: the ones norms can be compared over.

    (grad_max is None where the probe did not measure it: the gradient is then known to be
    non-zero and finite from its norm.)"""
    return [p for p in stats.params if p.has_grad and p.finite and p.grad_max != 0]


def dense_rms(p: ParamStats) -> float:
    """RMS over the non-zero elements, so sparse (embedding) gradients compare fairly."""
    nonzero = p.numel * (1.0 - (p.zero_fraction or 0.0))
    return (p.grad_norm or 0.0) / max(nonzero, 1.0) ** 0.5


def weight_rms(p: ParamStats) -> float:
    """The weights' own RMS per element, what a gradient step is measured against."""
    return p.weight_norm / max(p.numel, 1) ** 0.5


def is_zero_init(p: ParamStats) -> bool:
    """A trainable tensor whose weights are all zero: a zero initialisation."""
    return p.requires_grad and p.weight_norm == 0 and p.numel > 0


def parent(name: str) -> str:
    return name.rpartition(".")[0]


def ancestors(module: str) -> Iterator[str]:
    """`module`, its parent, ... up to the root ("")."""
    while module:
        yield module
        module = parent(module)
    yield ""
