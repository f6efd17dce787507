"""What a watched run's softmaxes saw at the sampled steps (watcher/logit_probe.py), as
plain data: the largest attention logit per attention module, the output logits'
log-partition at the cross-entropy. The precursor rules GS453 and GS454 read them. No
torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AttentionSeries:
    """One attention module's largest pre-softmax logit, |q·kᵀ|·scale, per sampled step
    (its first batch element; causal positions only)."""

    module: str
    steps: tuple[int, ...]
    maxima: tuple[float, ...]


@dataclass(frozen=True)
class OutputLogits:
    """The logits given to cross_entropy: log Z = logsumexp over the classes, per row."""

    steps: tuple[int, ...]
    mean: tuple[float, ...]
    """The mean of log Z over the step's rows (its first 256)."""
    max: tuple[float, ...]
    classes: int
