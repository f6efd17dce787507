"""What a watched run showed of the model's mode, Adam's eps and the batches, as plain data.

The watcher reads these from host flags at the optimizer steps and from device values at
a few sampled steps, read back once when the run ends (watcher/modes.py, adam_eps.py,
same_batch.py); the rules GS440-GS443 read them here. No torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gradscope.steps.logit_facts import AttentionSeries, OutputLogits


@dataclass(frozen=True)
class EvalSpan:
    """A model whose parameters an optimizer trained while the model was in eval mode."""

    model: str
    """The model's class name."""
    optimizer: int
    first: int
    """The first optimizer step it was in eval mode at."""
    last: int
    steps: int
    """Optimizer steps taken in eval mode."""
    of: int
    """Optimizer steps of that optimizer seen, in either mode."""
    dropouts: tuple[str, ...]
    """Its dropout modules (p > 0) that were identities at those steps."""
    norms: tuple[str, ...]
    """Its BatchNorm modules with trained weights that normalised with running
    statistics (and left them unchanged) at those steps."""
    where: str | None = None
    """file:line of the script's `eval()` (or `train(False)`) call that switched it."""
    beside: str | None = None
    """Another model the same optimizer trained in train mode (its class name)."""
    before_training: bool = False
    """That eval() call came before the run's first optimizer step."""
    named: str | None = None
    """The script's module-level name for the model (`baseline`): a greedy-rollout
    baseline is a copy of the policy, of its class, so the class alone names either."""


@dataclass(frozen=True)
class StillStats:
    """A BatchNorm whose running statistics are where they started at the end of the run."""

    name: str
    kind: str
    """Its class name (BatchNorm2d, ...)."""
    momentum: float | None
    """Its momentum (None: a cumulative average)."""
    eval_steps: int
    """Optimizer steps of the run it was in eval mode at."""
    steps: int
    """Optimizer steps of the run seen."""
    trained: bool
    """Its weight or bias had a gradient at some step."""


@dataclass(frozen=True)
class EpsSample:
    """At one step of an Adam-family optimizer, where eps outweighs √v̂."""

    optimizer: int
    step: int
    eps: float
    shares: tuple[tuple[int, float, int], ...]
    """(parameter position, share of its elements with v > 0 where √v̂ < eps, how many
    elements have v > 0), for each parameter with a state."""
    known: bool = True
    """The optimizer's class is known to step Adam's rule (watcher/optim_known.py); else
    these shares mean eps against √v̂ only where the update measured is Adam's
    (rules/adam_measured.py)."""
    predicted: tuple[tuple[int, float], ...] = ()
    """Where not known, at the first steps: (parameter position, ‖û‖, Adam's update over
    the lr from the state)."""

    def dominated(self) -> tuple[int, int]:
        """(elements where eps outweighs √v̂, elements with v > 0), over every parameter."""
        live = sum(n for _, _, n in self.shares)
        under = sum(round(s * n) for _, s, n in self.shares)
        return under, live


@dataclass(frozen=True)
class StateSample:
    """At one step of an Adam-family optimizer whose update was measured, per tensor from
    its state (watcher/adam_rms.py)."""

    optimizer: int
    step: int
    tensors: tuple[tuple[int, float, float, float], ...]
    """(parameter position, RMS_t = √mean(g²/max(v̂, eps²)), the update's RMS over the lr
    = √mean((m̂/(√v̂ + eps))²), share of its elements with v > 0 where √v̂ < eps)."""


@dataclass(frozen=True)
class BatchRepeats:
    """The loss's targets compared between consecutive optimizer steps."""

    optimizer: int
    compared: tuple[int, ...]
    """Steps whose targets were compared with the previous step's."""
    same: tuple[int, ...]
    """Of those, the steps whose targets were identical (and not all one value, nor
    positions 0..n-1 in some order: labels that every batch shares)."""
    samples: int
    """Targets in one batch."""
    loss: str
    """The loss node the targets were read from (NllLossBackward0, ...)."""
    positional: bool = False
    """Every class-index target read was the positions 0..n-1 in some order or one index
    throughout: a contrastive loss's labels (each row's positive by its place)."""


@dataclass(frozen=True)
class MirroredPair:
    """Two tensors of one optimizer equal at its first step (positions among the tracked
    parameters), and the cosine between their gradients then (watcher/mirrored.py)."""

    first: int
    second: int
    cosine: float


@dataclass(frozen=True)
class FutureAttended:
    """One attention module of a next-token model: its queries' share of attention on
    later positions at the positions the loss counts (watcher/future_attention.py)."""

    module: str
    reads: tuple[int, ...]
    """Steps read (its queries and keys from a token lookup the loss reaches)."""
    next_token: tuple[int, ...]
    """Of those, the steps where that lookup read the targets shifted by one."""
    shares: tuple[float, ...]
    """The share on later keys at each step read, averaged over the counted positions."""


@dataclass(frozen=True)
class TargetCopies:
    """A cross-entropy's targets held against the token ids its model's embeddings read at
    the same step (watcher/target_leak.py)."""

    reads: tuple[int, ...]
    """Steps read (a CE over class indices and an embedding the loss reaches directly)."""
    copied: tuple[int, ...]
    """Of those, the steps where such an embedding read the targets themselves, at every
    position that counts."""
    shifted: tuple[int, ...]
    """Steps where some embedding read the targets shifted by one (a teacher-forced
    decoder)."""
    table: str = ""
    """The embedding's table, V×D."""
    padded: tuple[tuple[int, int, int], ...] = ()
    """(step, positions, counted) of the steps read where an embedding with a padding_idx
    read it at positions whose counted target is that same id: padding trained to predict
    padding (the labels' padding not set to ignore_index)."""
    padding: int = -1
    """That padding_idx."""


@dataclass(frozen=True)
class TrainModeEval:
    """A trained model run forward without gradients (no_grad, inference_mode) while in
    train mode: an evaluation whose dropouts and BatchNorms behaved as in training."""

    model: str
    first: int
    """Optimizer steps taken before its first such forward."""
    passes: int
    """Such forwards in all."""
    steps: int
    """Distinct points of the run (optimizer steps taken) with such a forward."""
    of: int
    """Optimizer steps the run took."""
    dropouts: tuple[str, ...]
    norms: tuple[str, ...]
    """Its BatchNorms in train mode that track running statistics with a momentum."""
    where: str | None = None
    """file:line of the script's call that ran the first such forward."""
    resampled: int = 0
    """Such forwards on the same input as the one before them, at the same step: stochastic
    passes averaged over (Monte Carlo dropout)."""
    lanes: int = 0
    """Such forwards inside torch.func.vmap with randomness='different': each lane of the
    one call draws its own dropout masks (Monte Carlo dropout's samples in one pass)."""
    used_after: bool = False
    """A forward without gradients in eval mode followed: the statistics were used."""


@dataclass(frozen=True)
class SideSteps:
    """The steps of one optimizer that applied a backward called at another line than its
    most common one: another objective (a lazy regulariser's own backward and step)."""

    optimizer: int
    site: str
    """file:line of that backward call."""
    steps: tuple[int, ...]


@dataclass(frozen=True)
class DriftedNorms:
    """A frozen network (no parameter trained or written during the run) whose BatchNorms
    ran forwards in train mode: its running statistics followed the batches."""

    network: str
    """Its name: the top-level module's class, then its path inside."""
    kind: str
    """Its class name."""
    norms: tuple[str, ...]
    """Its BatchNorms whose statistics moved, named inside it."""
    forwards: int
    """The most training-mode forwards one of them ran from step `since` on."""
    since: int
    """The optimizer step the network was first read at (its first)."""
    steps: int
    """Optimizer steps the run took."""


@dataclass(frozen=True)
class StateFacts:
    """Everything of the above for one run."""

    eval_spans: tuple[EvalSpan, ...] = ()
    still_stats: tuple[StillStats, ...] = ()
    eps: tuple[EpsSample, ...] = ()
    repeats: tuple[BatchRepeats, ...] = ()
    attention: tuple[AttentionSeries, ...] = ()
    """The largest attention logit per attention module, at sampled steps (logit_facts)."""
    output_logits: OutputLogits | None = None
    train_evals: tuple[TrainModeEval, ...] = ()
    adam: tuple[StateSample, ...] = ()
    """Adam's per-tensor RMS_t and update RMS at the measured steps (StateSample)."""
    no_grad_steps: int = 0
    """Points of the run (optimizer steps taken) at which a trained model ran forward
    without gradients, in either mode (eval_passes.py): at most of them, the model acts
    or makes its own targets."""
    dropped: tuple[int, ...] = ()
    """Parameter positions whose gradient the backward filled and the script set to None
    before the step, at every sampled step (dropped_grads.py)."""
    copy_steps: int = 0
    """Points of the run at which a copy of a trained model that moved between its
    forwards (an EMA teacher, a synced target network) ran forward without gradients
    (moving_copies.py)."""
    copy_states: tuple[tuple[str, str, tuple[int, ...], bool], ...] = ()
    """(the copy's name, the trained model's, positions of its parameters, whether the copy
    changed)
    per copy of a trained model that ran forward without gradients at sampled steps, tracked
    or not: an EMA teacher moves, a target network nothing updates does not
    (moving_copies.py)."""
    through_copies: tuple[int, ...] = ()
    """Parameter positions of copies of a trained model that a forward with gradients on
    fed a trained network's output: the loss differentiates through them by design
    (copies_through.py)."""
    side_steps: tuple[SideSteps, ...] = ()
    copies: tuple[TargetCopies, ...] = ()
    future_attended: tuple[FutureAttended, ...] = ()
    hand_moved: tuple[int, ...] = ()
    """Parameter positions an optimizer steps that the script also wrote in place between
    its steps while they held a gradient, at every interval compared (hand_moved.py)."""
    hand_compared: int = 0
    """Intervals between an optimizer's steps compared for it."""
    hand_written: tuple[int, ...] = ()
    """Parameter positions written in place between their optimizer's steps while they
    held a gradient, in one interval compared at least (hand_moved.py)."""
    put_back: tuple[int, ...] = ()
    """Parameter positions the script wrote back, between two steps of their optimizer, to
    the values the first of them started from, after it moved them: an episodic reset to a
    snapshot, in one interval compared at least (hand_moved.py)."""
    passes_to: tuple[tuple[int, tuple[int, ...]], ...] = ()
    """(parameter position, the optimizers holding tensors below its ops in the loss's
    graph) at the latest read, in a run of two optimizers or more (passed_through.py)."""
    drifted_norms: tuple[DriftedNorms, ...] = ()
    """Frozen networks whose BatchNorm statistics moved (watcher/frozen_norms.py)."""
    same_grads: tuple[tuple[int, int, int], ...] = ()
    """(optimizer index, intervals between its sampled steps in which a backward ran and
    every gradient was written with the values the step before applied, intervals
    compared) (watcher/same_grads.py)."""
    mirrored: tuple[MirroredPair, ...] = ()
    """Tensors of one optimizer equal at its first step, with their gradients' cosine
    (watcher/mirrored.py)."""
    notes: tuple[str, ...] = field(default_factory=tuple)
