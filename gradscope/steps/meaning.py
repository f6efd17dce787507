"""What a watched run's numbers mean: the loss's kind and the optimizer's settings.

Plain data, no torch. The watcher reads them off the loss's autograd graph and the
optimizer's param groups (watcher/loss_graph.py, watcher/optim_settings.py); the rules
judge a run by them where thresholds alone cannot: a cross-entropy below 0 is being
maximised, a loss at ln C has learned nothing, a decay of lr × wd per step erases
weights that the optimizer's steps cannot hold up.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

BOUNDED_BELOW = {
    "cross_entropy": 0.0,
    "nll_log_softmax": 0.0,
    "binary_cross_entropy": 0.0,
    "binary_cross_entropy_with_logits": 0.0,
    "mse": 0.0,
    "l1": 0.0,
    "pinball": 0.0,
    "smooth_l1": 0.0,
    "huber": 0.0,
    "label_smoothing": 0.0,
    "soft_cross_entropy": 0.0,
    "ctc": 0.0,
    "logistic_loss": 0.0,
    "gaussian_kl": 0.0,
}
"""Loss kinds whose value can never fall below this bound (for targets in their domain:
class indices, probabilities in [0, 1]): a run that goes below it is not minimising it."""


UNIFORM = ("cross_entropy", "label_smoothing")
"""Kinds whose value for a uniform guess over C classes is known: ln C per target (the
smoothing term of a label-smoothed cross-entropy sums -log(1/C) over the C classes)."""


@dataclass(frozen=True)
class LossTerm:
    """One recognised loss in the value backward ran on, and how it enters it."""

    kind: str
    """cross_entropy (log_softmax then NLL), nll (NLL of other inputs), mse, l1 (an
    absolute value: l1_loss, an absolute error reduced by hand), pinball (quantile loss),
    smooth_l1, huber, binary_cross_entropy(_with_logits), label_smoothing,
    soft_cross_entropy (probability targets times log_softmax), ctc (ctc_loss), logistic_loss
    (-log sigmoid(x) or softplus(x): negative sampling's loss), poisson_nll (exp(x) - y·x on a
    log-rate, μ - y·log μ on a rate: count models; not bounded below by 0), gaussian_kl (a
    diagonal Gaussian's KL from another written out: a VAE's or CVAE's latent term)."""
    reduction: str
    """mean | sum | none (reduced afterwards by the graph: a mean or sum node)."""
    factor: float
    """The constant the term is multiplied by on its way to the loss (-1: negated;
    0.25: divided by 4 gradient-accumulation steps); NaN where a factor could not be
    read without a device sync."""
    classes: int | None = None
    """The number of classes of a (binary) cross-entropy or NLL."""
    count: int | None = None
    """Elements the loss sums over (its targets), for a sum reduction's scale."""
    misfed: str | None = None
    """What the loss got where it wants logits: softmax (a softmax under cross_entropy's
    own log_softmax), sigmoid (under binary_cross_entropy_with_logits' own),
    softmax-wrong-dim, log-softmax-wrong-dim (normalised over another axis than the
    loss's classes), softmax-not-log (probabilities where nll_loss or ctc_loss wants
    log-probabilities), rate-as-log-rate (a Poisson NLL's log-rate out of exp, softplus or
    relu), softmax-as-bce-logits (a softmax under binary_cross_entropy_with_logits),
    logits-as-targets (a soft-target cross-entropy's targets with a negative entry);
    softmax-kl-input and probs-as-log-target (kl_div given probabilities as its input, or a
    target that is no log-probabilities under log_target=True), softmax-as-logits and
    squashed-twice (a softmax over a softmax, a sigmoid over a sigmoid) and
    sigmoid-as-log-sigmoid-logits (F.logsigmoid over a sigmoid's output) only as
    `LossKind.renormalised`; None: logits, or log-probabilities over the classes."""
    misfed_detail: str = ""
    """The ops and axes, in words."""
    floor: float | None = None
    """The lowest value it can reach when fed probabilities (per target, mean reduction):
    ln(1 + (C-1)/e) for a double softmax, ln(1 + 1/e) for a double sigmoid."""
    own_target: bool = False
    """Its target is another term's input, detached (the same storage): VQ-VAE's codebook
    loss ‖sg(z) - e‖² beside its commitment loss ‖z - sg(e)‖² pulls two trained tensors
    toward each other, so the target moves as the model learns."""
    upstream_target: bool = False
    """Its target is attached and its input was computed from it (watcher/upstream_targets.py):
    the loss moves the target toward the prediction too, and a constant makes it 0."""
    sign_varies: bool = False
    """It came negated at some steps and not at others, one sign per step: a factor read
    from the data (a return, a reward) sets its sign, not the objective."""
    counted: bool = False
    """A sum whose factor changed between the steps read: divided by a count the script
    takes from each batch (a detector's positive anchors or objects), a mean over what it
    counts rather than a sum over the batch."""
    ramped: bool = False
    """Its factor was 0 at the first steps read and not at a later one: a schedule switches
    it on (a verified loss mixed in as its epsilon ramps up, a consistency warm-up)."""
    radius: float | None = None
    """Its input is the worst case over an input box of this radius, carried through |W|
    (interval bound propagation: certified training's epsilon), the largest read so far;
    None: no interval bound."""

    @property
    def bound(self) -> float | None:
        """Before its factor. A label-smoothing term, -Σ_c log q_c over the C classes, is
        least where q is uniform (C ln C per target, whatever fed its log_softmax; a sum
        over its targets, that times their count)."""
        if self.misfed in ("softmax-not-log", "logits-as-targets"):
            return None  # probabilities read as log-probabilities, negative targets: no floor
        if self.kind == "label_smoothing" and self.classes:
            targets = self.count if self.reduction == "sum" and self.count else 1
            return self.classes * math.log(self.classes) * targets
        base = BOUNDED_BELOW.get(self.kind)
        return base if base is None or self.floor is None else self.floor

    @property
    def negated(self) -> bool:
        return self.factor < 0

    def uniform(self) -> float | None:
        """The term's value for a model that guesses uniformly over its classes (ln C
        per target); None where that has no meaning."""
        if self.kind not in UNIFORM or not self.classes or self.classes < 2:
            return None
        per = math.log(self.classes) * (self.classes if self.kind == "label_smoothing" else 1)
        if self.reduction == "sum":
            if not self.count:
                return None
            per *= self.count
        return per * self.factor if math.isfinite(self.factor) else None

    def describe(self) -> str:
        name = self.kind.replace("_", "-")
        if self.classes:
            name += f" over {self.classes} classes"
        sign = "-" if self.negated else ""
        factor = abs(self.factor)
        scaled = f" × {factor:.4g}" if math.isfinite(factor) and factor != 1 else ""
        return f"{sign}{name} ({self.reduction}){scaled}"


@dataclass(frozen=True)
class LossKind:
    """The loss as its graph shows it: the recognised terms, and whether any is not."""

    terms: tuple[LossTerm, ...]
    unknown_terms: int = 0
    """Terms of the sum gradscope did not recognise (a custom loss, a regulariser)."""
    scaled: bool = False
    """backward ran on GradScaler's scaled loss; the terms are read below the scale."""
    where: str | None = None
    """file:line of the backward call, where a term was fed probabilities."""
    derivative: bool = False
    """The graph holds a gradient taken with create_graph: the loss reads the model through
    a derivative of its output (a force field's forces, a Hamiltonian's time derivatives)."""
    renormalised: LossTerm | None = None
    """A softmax's probabilities normalised again as logits below the loss, whatever its
    terms (watcher/renormalised.py: Categorical(logits=probs) in a policy gradient), or
    read by kl_div as log-probabilities (watcher/kl_inputs.py): its `misfed` says so; no
    term of the loss's sum, so no bound or sign of it."""
    self_scaled: str | None = None
    """A term divided by an attached magnitude of itself (watcher/self_scaled.py: TD3+BC's
    Q term over `Q.abs().mean()` not detached), in words: its gradient vanishes."""

    def own_targets(self) -> bool:
        """A term's target is another term's input, detached (LossTerm.own_target)."""
        return any(t.own_target for t in self.terms)

    def misfed(self) -> list[LossTerm]:
        """The terms fed probabilities (or log-probabilities over the wrong axis), and
        probabilities normalised again as logits below them."""
        found = [t for t in self.terms if t.misfed]
        return [*found, self.renormalised] if self.renormalised is not None else found

    @property
    def known(self) -> bool:
        return bool(self.terms) and not self.unknown_terms

    def lower_bound(self) -> float | None:
        """The loss's lower bound when every term is known, bounded and not negated."""
        if not self.known or any(t.bound is None or t.factor < 0 for t in self.terms):
            return None
        if any(not math.isfinite(t.factor) for t in self.terms):
            return None
        return sum((t.bound or 0.0) * t.factor for t in self.terms)

    def negated_terms(self) -> list[LossTerm]:
        """Bounded-below terms the loss subtracts: minimising it maximises them."""
        return [t for t in self.terms if t.bound is not None and t.negated and not t.sign_varies]

    def uniform(self) -> float | None:
        """The loss of a uniform guess, when it is a cross-entropy (label-smoothed or not,
        times a factor): per backward call."""
        if not self.known or any(t.sign_varies for t in self.terms):
            return None
        values = [t.uniform() for t in self.terms]
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    def describe(self) -> str:
        """The terms in order, a run of equal ones told once with its count (a loss summed
        over the time steps of an unrolled sequence: `8 × (cross-entropy ...)`)."""
        if not self.terms:
            return "unknown (a custom loss: judged by its values only)"
        runs: list[list[Any]] = []
        for t in self.terms:
            text = t.describe()
            if runs and runs[-1][0] == text:
                runs[-1][1] += 1
            else:
                runs.append([text, 1])
        out = ""
        for text, count in runs:
            minus = text.startswith("-")
            body = text.removeprefix("-")
            body = f"{count} × ({body})" if count > 1 else body
            joint = ("-" if minus else "") if not out else (" - " if minus else " + ")
            out += joint + body
        if self.unknown_terms:
            out += f" + {self.unknown_terms} term(s) not recognised"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "terms": [asdict(t) for t in self.terms],
            "unknown_terms": self.unknown_terms,
            "description": self.describe(),
            "lower_bound": self.lower_bound(),
            "uniform_guess": self.uniform(),
            "where": self.where,
        }


@dataclass(frozen=True)
class SchedulerInfo:
    """An lr scheduler the script stepped, and how often against its optimizer's steps."""

    kind: str
    """Its class name: StepLR, CosineAnnealingLR, OneCycleLR, ..."""
    settings: str
    """Its schedule's own numbers, as its constructor took them ("step_size=10, gamma=0.1")."""
    optimizer: int
    """Index of the optimizer it schedules (-1: one that never stepped)."""
    calls: int
    """scheduler.step() calls from its optimizer's first step on."""
    first: int
    last: int
    """Optimizer steps taken by the run at its first and last such call."""
    site: str | None = None
    """`file:line` of the script's first such call."""
    shape: str = ""
    """Where its class takes the lr: "falls" (only down: StepLR, ExponentialLR, ...),
    "ends" after `horizon` calls (a cosine, a linear decay, OneCycleLR), "" unknown."""
    horizon: int | None = None
    """The calls after which an "ends" schedule is at its end value."""
    past: int | None = None
    """The first optimizer step that ran on an lr beyond the horizon: the run outlived
    its schedule."""
    stepper: str = ""
    """"lightning" where Lightning's loop stepped it (configure_optimizers' `interval`
    sets the pace), "" where the script's own code did."""

    @property
    def per_step(self) -> float:
        """Its calls per optimizer step of the run between its first and last call."""
        return self.calls / max(1, self.last - self.first + 1)

    def describe(self) -> str:
        return f"{self.kind}({self.settings})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_step": self.per_step}


@dataclass(frozen=True)
class GroupSettings:
    """One param group's hyperparameters as the optimizer used them at a step (its lr
    takes no part in comparisons: schedules change it every step, `StepRecord.lrs`
    holds it)."""

    lr: float = field(compare=False)
    weight_decay: float = 0.0
    decoupled: bool | None = False
    """Decay applied to the weights directly (AdamW), not added to the gradient (L2); None
    where the optimizer's class does not say which (watcher/optim_known.py)."""
    momentum: float | None = None
    betas: tuple[float, float] | None = None
    eps: float | None = None
    maximize: bool = False
    nesterov: bool = False
    line_search: bool = False
    """LBFGS's line_search_fn is set: a line search sizes each step, not lr alone."""


QUASI_NEWTON = ("LBFGS",)
"""The optimizers whose step sizes itself from curvature (torch.optim's LBFGS)."""

EXTERNAL_DRIVER = "scipy.optimize"
"""The kind of updates by hand that a minimiser outside torch makes, calling the objective
at each point it evaluates (watcher/external_driver.py): a quasi-Newton step sized by a
line search, each of whose trial points is a step of its own."""


@dataclass(frozen=True)
class OptimizerSettings:
    """An optimizer's param groups from `since` (its 1-based step) until they change."""

    kind: str
    since: int
    groups: tuple[GroupSettings, ...]
    update: str = ""
    """What its step is, as far as gradscope knows the class (watcher/optim_known.py):
    "adam" (torch's Adam family), "sign" (Lion), "adapted" (about d·lr per element, d its
    own estimate: Prodigy), "torch" (torch's other classes), "" unknown: no rule then
    reads its lr, betas or decay with Adam's or SGD's meaning ("adapted" neither: its lr
    is a multiplier of d)."""
    noise: tuple[float, float, float] | None = None
    """(sigma, C, std an element) of the noise a differentially private wrapper adds to the
    gradient it writes (watcher/added_noise.py); None: none."""

    @property
    def adaptive(self) -> bool:
        """Adam-like: each element's step is about lr, whatever the gradient's scale."""
        return self.update in ("adam", "sign")

    @property
    def bounded(self) -> bool:
        """Each element's step is bounded whatever the gradient's scale: about lr (Adam's
        family, Lion) or d·lr (an optimizer adapting its own step size, d its estimate)."""
        return self.adaptive or self.update == "adapted"

    @property
    def known(self) -> bool:
        return self.update not in ("", "adapted")

    @property
    def sizes_own_step(self) -> bool:
        """Quasi-Newton (LBFGS): a step is up to max_iter iterations along a direction
        scaled by its curvature estimate, their length set by a line search or by lr times
        that estimate, not lr × the gradient: a large move per step is its design."""
        return self.kind in QUASI_NEWTON or self.evaluations

    @property
    def evaluations(self) -> bool:
        """Each step is one evaluation of a fixed objective by an external minimiser, its
        line search's trial points included: a gradient that jumps at a trial point and
        falls back at the next is its search, not a batch or a blow-up."""
        return self.kind == EXTERNAL_DRIVER

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "since_step": self.since,
            "update": self.update or None,
            "groups": [{**asdict(g), "betas": g.betas and list(g.betas)} for g in self.groups],
        } | ({"added_noise": list(self.noise)} if self.noise else {})
