"""What a watched run's softmaxes saw at the sampled steps (watcher/logit_probe.py), as
plain data: the largest attention logit per attention module, the output logits'
log-partition at the cross-entropy. The precursor rules GS453 and GS454 read them. No
torch."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class AttentionSeries:
    """One attention module's largest pre-softmax logit, |q·kᵀ|·scale, per sampled step
    (its first batch element; causal positions only)."""

    module: str
    steps: tuple[int, ...]
    maxima: tuple[float, ...]


@dataclass(frozen=True)
class WeightNorm:
    """One tensor's L2 norm at the output logits' sampled steps: the output head's weight
    or a norm layer's gain, whose growth comes with logit growth (Wortsman et al. 2023).
    Recorded for the reader, judged by no rule: it grows alike in a healthy run with
    qk-layernorm (docs/watch.md)."""

    name: str
    kind: str
    """"head" (the last 2-d weight with a row per class) or "norm gain"."""
    norms: tuple[float, ...]


@dataclass(frozen=True)
class OutputLogits:
    """The logits given to cross_entropy: log Z = logsumexp over the classes, per row."""

    steps: tuple[int, ...]
    mean: tuple[float, ...]
    """The mean of log Z over the step's rows (its first 256)."""
    max: tuple[float, ...]
    classes: int
    weights: tuple[WeightNorm, ...] = field(default_factory=tuple)
    """The output head's and the norm layers' gains' norms at the same steps."""
    level: tuple[float, ...] = ()
    """The mean logit over the classes (the level a softmax ignores), averaged over the
    same rows; empty where not measured. log Z is this level plus the logsumexp of the
    centred logits, which grows as the model grows confident."""
