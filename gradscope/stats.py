"""What one instrumented forward+backward measured: plain data, no torch.

probe → RunStats → rules, explain, reporters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ParamStats:
    """Gradient statistics of one parameter tensor after one backward pass."""

    name: str
    module: str
    """Name of the owning module ("" for the root)."""
    shape: tuple[int, ...]
    dtype: str
    requires_grad: bool
    has_grad: bool
    grad_norm: float | None = None
    grad_max: float | None = None
    """max |grad|; None where not measured (a large dense tensor with a finite, non-zero norm:
    see fused_stats.EXACT_MAX). Exactly 0.0 or NaN/Inf whenever the gradient is all-zero or not
    finite."""
    weight_norm: float = 0.0
    zero_fraction: float | None = None
    """Fraction of exactly-zero gradient elements; None where not measured (as grad_max)."""
    finite: bool = True
    depth: int | None = None
    """Position of the owning module in forward execution order (None: never ran)."""
    lookup: bool = False
    """A row-lookup table (owned by an nn.Embedding/EmbeddingBag, tied or not): its gradient is
    a sum of activation gradients per looked-up row, not a weight gradient, so rules compare
    it with other lookup tables only."""
    derivative_offset: bool = False
    """An output differentiated with create_graph reaches it through sums, gathers and
    reshapes only (a per-species energy shift): that derivative gives it no gradient."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def ratio(self) -> float | None:
        """Gradient norm relative to weight norm: the size of one SGD step at lr=1."""
        if self.grad_norm is None or self.weight_norm == 0:
            return None
        return self.grad_norm / self.weight_norm


@dataclass(frozen=True)
class ModuleStats:
    name: str
    kind: str
    """Class name, for messages only."""
    ran: bool
    order: int | None = None
    """Index in forward execution order of first call."""


@dataclass(frozen=True)
class FedProbabilities:
    """A loss fed probabilities where it wants logits, as its graph shows it
    (watcher/loss_inputs.py): what fed it, in words, and the floor that sets."""

    what: str
    """softmax | sigmoid | softmax-wrong-dim | log-softmax-wrong-dim"""
    detail: str
    floor: float | None = None


@dataclass(frozen=True)
class RunStats:
    """Everything one instrumented forward+backward measured."""

    params: tuple[ParamStats, ...]
    modules: tuple[ModuleStats, ...]
    loss_value: float | None
    loss_finite: bool
    loss_requires_grad: bool
    loss_source: str
    """How the tensor that backward ran on was obtained, said in the report."""
    duration_s: float
    timed: str = "forward+backward+stats"
    """What duration_s covers."""
    model_class: str = ""
    device: str = "cpu"
    saved_bytes: int = 0
    """Bytes of tensors the forward saved for backward (activation memory)."""
    retained: tuple[str, ...] = ()
    """Module attributes still holding a tensor with a grad_fn after the pass."""
    loss_scale: float | None = None
    """A GradScaler scale removed from the loss and every gradient (None: none found)."""
    fed_probabilities: tuple[FedProbabilities, ...] = ()
    """Losses that want logits and were given probabilities (a double softmax)."""
    set_in_forward: tuple[str, ...] = ()
    """Parameters their own module wrote in place during the measured forward (a data-dependent
    initialisation: Glow's ActNorm set from its first batch): their gradient is taken at the
    point that batch just set, not a gradient that failed to reach them."""
    weighted_off: tuple[str, ...] = ()
    """Parameters the loss reaches only through a term multiplied by a constant 0 (a loss
    weight off at this step: a GAN term before its discriminator starts)."""
    clamped_off: tuple[str, ...] = ()
    """Parameters the loss reaches only through a clamp (a max, a min) whose input is entirely
    on the far side of its bound at this step (a KL held at its free-nats floor)."""
    flat_off: tuple[tuple[str, str], ...] = ()
    """(parameter, op): the loss reaches it only through an op whose derivative is 0
    (torch.sign, round) or through one custom autograd.Function (an estimator's backward)."""
    zero_gated: tuple[str, ...] = ()
    """Parameters the loss reaches only through a product with a trainable parameter that is
    all zeros (ReZero's alpha, a tanh gate at 0), named in zero_gates: the first step moves it."""
    zero_gates: tuple[str, ...] = ()
    frozen_gated: tuple[str, ...] = ()
    """The same through a frozen zero parameter (frozen_gates): no step ever moves it."""
    frozen_gates: tuple[str, ...] = ()
    skipped_at_random: tuple[str, ...] = ()
    """Modules that did not run because their parent's forward skips layers at random in
    training (LayerDrop), while siblings of their kind ran."""
    picked_choices: tuple[str, ...] = ()
    """Candidates of a module list that did not run while one sibling of their kind did, the
    forward calling the candidate an index picks (a one-shot supernet's sampled path)."""
    loss_terms: int | None = None
    """The loss adds up this many terms (`.sum()`, reduction='sum'): its gradients are that
    many times a mean-reduced loss's, so absolute bounds are judged per term. None: a mean
    or a reduction not known."""
    norm_fed: tuple[str, ...] = ()
    """Modules whose output went unchanged into a LayerNorm/RMSNorm (inspector/norm_feeds.py):
    a weight that is the module's only parameter is scale-invariant."""
    loss_through_derivative: bool = False
    """The loss's graph holds a gradient taken with create_graph (a force field's forces, a
    Hamiltonian's time derivatives): the model is read through that derivative."""
    one_step_of_script: bool = False
    """Measured at one backward of a training script: a later step's loss may use what this
    one leaves out (a variance head trained after its mean's warm-up)."""
    untrained: tuple[str, ...] = ()
    """At one step of a script: parameters no optimizer held then, while one held others of
    the model (inspector/optimizer_held.py): a phase that does not train them."""
