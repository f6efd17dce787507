"""The gradient noise scale from two batch sizes (McCandlish et al. 2018, appendix A.1).

A step whose gradient was summed from K micro-batch gradients g_1..g_K (gradient
accumulation, or K/W micro-batches on each of W data-parallel ranks) knows the squared
norm at two batch sizes: the mean over j of |g_j|² (batch b, one micro-batch) and
|G|² of the step's gradient, their mean (batch K·b). Since E|G_B|² = |G|² + tr(Σ)/B,

    |G|²  ≈ (K·|G_Kb|² - |G_b|²) / (K - 1)
    tr(Σ) ≈ b·(|G_b|² - |G_Kb|²) / (1 - 1/K)      (per sample)

are unbiased; each is smoothed over steps on its own (an exponential moving average,
as the paper does) and B_simple = tr(Σ)/|G|², in samples when b is known, else in
micro-batches. No torch: the records hold the plain numbers (`micro_batches`,
`micro_sq`, `grad_norm`, `batch_samples`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gradscope.steps.step_record import StepRecord, steps_by_optimizer

EMA_DECAY = 0.95
"""Smoothing of the two per-step estimates (about 20 steps of memory)."""
WINDOW = 100
"""The summary's estimate: the last this many measured steps, estimates summed."""
MIN_STEPS = 10
"""Fewer measured steps give no estimate worth stating."""

NEEDS_TWO = (
    "the noise scale needs >= 2 micro-batches (accumulation) or ranks per step: this run has one"
)
NOT_RESET = (
    "not measured: the gradients were not reset between steps (zero_grad() is missing, "
    "GS412), so each step's gradient also holds the earlier steps' and tells nothing "
    "about the batch size"
)
NOT_ONE_LOSS = (
    "not measured: the backward calls of each step were not micro-batches of one loss "
    "(they came from different lines of code, the gradients were reset between them, or "
    "several threads ran them)"
)


def step_estimate(record: StepRecord) -> tuple[float, float] | None:
    """(|G|², tr(Σ) per micro-batch) unbiased from one step; None where it was not
    measured, or where the step's gradient still held the previous step's (no zero_grad):
    the micro-batches then do not average to it."""
    if record.carried_norm:
        return None
    k = record.micro_batches
    small, big = record.micro_sq, record.grad_norm**2
    if k < 2 or small is None or not (math.isfinite(small) and math.isfinite(big)):
        return None
    return (k * big - small) / (k - 1), k * (small - big) / (k - 1)


@dataclass(frozen=True)
class NoisePoint:
    """The smoothed estimate after one measured step."""

    step: int
    b_simple: float | None
    """tr(Σ)/|G|² from the moving averages, in samples (or micro-batches where the
    batch size is unknown); None while the averaged |G|² is not above 0."""
    grad_sq: float
    trace: float
    """The moving averages of |G|² and tr(Σ) (tr(Σ) per sample, or per micro-batch)."""


class Smoother:
    """The two moving averages of one optimizer's steps, fed as they are read back (the
    --log writes each step's point as it goes)."""

    def __init__(self) -> None:
        self.grad_sq = self.trace = self.weight = 0.0

    def add(self, r: StepRecord) -> NoisePoint | None:
        """The point after step `r`; None where it was not measured."""
        estimate = step_estimate(r)
        if estimate is None or r.skipped:
            return None
        g2, s = estimate
        scale = float(r.batch_samples) if r.batch_samples else 1.0
        self.grad_sq = EMA_DECAY * self.grad_sq + (1 - EMA_DECAY) * g2
        self.trace = EMA_DECAY * self.trace + (1 - EMA_DECAY) * s * scale
        self.weight = EMA_DECAY * self.weight + (1 - EMA_DECAY)
        ok = self.grad_sq > 0 and self.trace >= 0
        b = self.trace / self.grad_sq if ok else None
        return NoisePoint(r.step, b, self.grad_sq / self.weight, self.trace / self.weight)


def series(steps: Sequence[StepRecord], optimizer: int | None = None) -> list[NoisePoint]:
    """The smoothed B_simple at every measured step (of one optimizer, when given)."""
    smoother = Smoother()
    points = (smoother.add(r) for r in steps if optimizer is None or r.optimizer == optimizer)
    return [p for p in points if p is not None]


READ_AS = "read as the model input's dim 0, or stated by --batch-size"
"""How samples were counted where the run kept no word of it (records made by hand)."""
UNREAD = "could not be read"
"""How a reason the batch size was not read begins (watcher/batch_read.py)."""


def read_as(reads: Sequence[str], unit: str) -> str:
    """What the line says of the batch's reading: how its samples were counted where it
    counts samples, why it was not read where it could not be, else nothing."""
    if unit == "samples":
        how = [r for r in reads if not r.startswith(UNREAD)]
        return " / ".join(how) or READ_AS
    return next((r for r in reads if r.startswith(UNREAD)), "")


@dataclass(frozen=True)
class NoiseSummary:
    """The run's critical batch size, or why there is none."""

    optimizer: int
    critical: float | None
    """B_simple over the window (estimates summed), in `unit`; None: see `reason`."""
    unit: str
    """"samples", or "micro-batches" where the batch size was not seen nor stated."""
    first_step: int
    last_step: int
    steps: int
    """Measured steps in the window."""
    batch: float | None
    """This run's batch per optimizer step in `unit` (K·b, or K)."""
    micro_batches: int
    """K: micro-batch gradients per step (over every rank)."""
    reason: str | None = None
    spread: float | None = None
    """One standard error of `critical` (a ratio estimate over steps taken as independent)."""
    micro_range: tuple[int, int] | None = None
    """(fewest, most) micro-batches per step where the window's steps differ (accumulation
    counts that change): then the run has no one batch, and `batch` is None."""
    batch_size: float | None = None
    """Samples per micro-batch where they were all alike (None: not seen, or they differ)."""
    read: str = ""
    """How those samples were counted ("read as dim 0 of the model's input"), or why the
    batch size was not ("could not be read: ..."); "" where nothing was seen."""

    @property
    def resolved(self) -> bool:
        """An estimate whose standard error is smaller than itself: one worth stating."""
        return self.critical is not None and (self.spread is None or self.spread <= self.critical)

    def line(self) -> str:
        """ "critical batch size ≈ N samples (steps 400-500); this run uses M"."""
        if self.critical is None:
            return f"noise scale: {self.reason}"
        spread = f" ± {_count(self.spread)}" if self.spread is not None else ""
        uses = f"this run uses {_count(self.batch)} ({self.micro_batches} micro-batches per step)"
        if self.micro_range is not None:
            lo, hi = self.micro_range
            per = self.unit == "samples" and self.sample_range()
            uses = (
                f"this run's steps use {lo} to {hi} micro-batches"
                + (f" ({per} samples)" if per else "")
                + ", not one batch size"
            )
        if self.unit == "samples":
            uses += f"; samples per micro-batch {self.read or READ_AS}: {_count(self.batch_size)}"
        elif self.read:
            uses += f"; the batch size {self.read}: give --batch-size"
        if not self.resolved:
            return (
                f"critical batch size not resolved: B_simple {_count(self.critical)}{spread} "
                f"{self.unit} over steps {self.first_step}-{self.last_step}, its spread larger "
                f"than itself; {uses}"
            )
        return (
            f"critical batch size ≈ {_count(self.critical)}{spread} {self.unit} (B_simple, steps "
            f"{self.first_step}-{self.last_step}); {uses}"
        )

    def sample_range(self) -> str:
        """ "lo-hi" samples per step where the micro-batch size is one (it is, in samples)."""
        if self.micro_range is None or not self.micro_batches or self.batch_size is None:
            return ""
        lo, hi = self.micro_range
        return f"{_count(lo * self.batch_size)}-{_count(hi * self.batch_size)}"

    def to_dict(self) -> dict[str, object]:
        return {
            "optimizer": self.optimizer,
            "critical_batch": self.critical,
            "unit": self.unit,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "steps": self.steps,
            "batch": self.batch,
            "micro_batches": self.micro_batches,
            "reason": self.reason,
            "spread": self.spread,
            "resolved": self.resolved,
            **({"micro_batches_range": list(self.micro_range)} if self.micro_range else {}),
            "samples_per_micro_batch": self.batch_size if self.unit == "samples" else None,
            "batch_read": self.read or None,
        }


def _count(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if v < 100 else f"{round(v):,}".replace(",", " ")


def _unresolved(steps: int, grad_sq: float, trace: float, first: int, end: int) -> str | None:
    """Why the estimate over these steps says nothing, or None."""
    if steps < MIN_STEPS:
        return f"only {steps} measured steps (the estimate needs {MIN_STEPS})"
    if grad_sq <= 0 or trace < 0:
        return (
            f"not resolved over steps {first}-{end}: the estimate of |G|² is not above 0, "
            "the gradient's mean is lost in its noise at this batch size"
        )
    return None


def summarise(
    steps: Sequence[StepRecord], optimizer: int, window: int = WINDOW, reads: Sequence[str] = ()
) -> NoiseSummary:
    """B_simple over the optimizer's last `window` measured steps; `reads`: how the run's
    micro-batches were counted (WatchRun.batch_read)."""
    own = [r for r in steps if r.optimizer == optimizer and not r.skipped]
    carried = [r for r in own if r.carried_norm]
    if own and 2 * len(carried) > len(own[1:]):  # the first step carries nothing to tell
        return NoiseSummary(optimizer, None, "samples", 0, 0, 0, None, 0, NOT_RESET)
    measured = [(r, e) for r in own if (e := step_estimate(r)) is not None]
    if not measured:
        several = any(r.backward_calls > 1 for r in own[1:])  # hooks go on at the first step
        why = NOT_ONE_LOSS if several else NEEDS_TWO
        return NoiseSummary(optimizer, None, "samples", 0, 0, 0, None, 0, why)
    last = measured[-window:]
    sizes = {r.batch_samples for r, _ in last}
    b = sizes.pop() if len(sizes) == 1 else None
    unit = "samples" if b else "micro-batches"
    k = last[-1][0].micro_batches
    counts = {r.micro_batches for r, _ in last}
    varied = (min(counts), max(counts)) if len(counts) > 1 else None
    first, end = last[0][0].step, last[-1][0].step
    grad_sq = sum(e[0] for _, e in last)
    trace = sum(e[1] for _, e in last) * (b or 1)
    batch = None if varied else k * (b or 1)
    reason = _unresolved(len(last), grad_sq, trace, first, end)
    critical = None if reason else trace / grad_sq
    spread = None
    if critical is not None:
        s = b or 1
        scatter = sum((e[1] * s - critical * e[0]) ** 2 for _, e in last)
        spread = math.sqrt(scatter * len(last) / (len(last) - 1)) / grad_sq
    return NoiseSummary(
        optimizer,
        critical,
        unit,
        first,
        end,
        len(last),
        batch,
        k,
        reason,
        spread,
        varied,
        b,
        read_as(reads, unit),
    )


def summaries(
    steps: Sequence[StepRecord], optimizers: int, reads: Sequence[str] = ()
) -> list[NoiseSummary]:
    """One per optimizer that has measured steps; one saying why not when none has."""
    own = steps_by_optimizer(steps)
    found = [summarise(own.get(i, []), i, reads=reads) for i in range(optimizers)]
    measured = [s for s in found if s.steps]
    return measured or found[:1]


def by_layer(
    names: Sequence[str], grad_sq: Sequence[float], trace: Sequence[float], scale: float
) -> dict[str, float]:
    """B_simple per module from the per-tensor sums of the two estimates (modules whose
    |G|² sum is not above 0 are left out)."""
    groups: dict[str, list[float]] = {}
    for name, g, s in zip(names, grad_sq, trace, strict=False):
        entry = groups.setdefault(name.rpartition(".")[0] or name, [0.0, 0.0])
        entry[0] += g
        entry[1] += s
    return {m: s * scale / g for m, (g, s) in groups.items() if g > 0 and s >= 0}


class LayerNoise:
    """Per tensor, moving averages of |G|² and tr(Σ) (per micro-batch): what `by_layer`
    reads at the end. Two floats per tensor, whatever the run's length."""

    def __init__(self) -> None:
        self.grad_sq: list[float] = []
        self.trace: list[float] = []
        self.optimizer: int | None = None
        """The optimizer whose steps fed it (the first one measured)."""

    def add(self, r: StepRecord) -> None:
        k, micro, norms = r.micro_batches, r.micro_param_sq, r.param_norms
        other = self.optimizer is not None and r.optimizer != self.optimizer
        if k < 2 or r.carried_norm or not micro or other:
            return
        self.optimizer = r.optimizer
        if len(self.grad_sq) < len(micro):
            grow = len(micro) - len(self.grad_sq)
            self.grad_sq += [0.0] * grow
            self.trace += [0.0] * grow
        for i, (small, norm) in enumerate(zip(micro, norms, strict=False)):
            if small < 0 or norm is None or not math.isfinite(small + norm):
                continue
            big = norm * norm
            self.grad_sq[i] = EMA_DECAY * self.grad_sq[i] + (1 - EMA_DECAY) * (k * big - small) / (
                k - 1
            )
            self.trace[i] = EMA_DECAY * self.trace[i] + (1 - EMA_DECAY) * k * (small - big) / (
                k - 1
            )
