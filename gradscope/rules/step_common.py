"""What the time-series rules share: formatting, step selection, per-optimizer series, the
spike test, the noise of a series. No torch."""

from __future__ import annotations

import itertools
import math
import shlex
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from gradscope.config import Thresholds
from gradscope.findings import Finding
from gradscope.fmt import num
from gradscope.rules.switched_on import objective_moves
from gradscope.steps.records import MANUAL, ParamInfo, StepRecord, WatchRun

MAD_SIGMA = 1.4826
"""MAD × this estimates the standard deviation of normal data."""

EARLY_MIN_HISTORY = 3
"""Steps of history before the first steps' own spike test can call a spike: fewer give
no median worth the name."""


FINDING_STEPS = 1000
"""Most steps a finding lists in `Finding.steps` (the first ones, in order); its message
or evidence counts them all."""


def about(finding: Finding, steps: Iterable[int]) -> Finding:
    """The finding, with the steps it is about (what the views mark)."""
    return replace(finding, steps=tuple(itertools.islice(sorted(set(steps)), FINDING_STEPS)))


def finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def step_list(steps: Sequence[int], cap: int = 6) -> str:
    shown = ", ".join(str(s) for s in steps[:cap])
    return shown + (f" … (+{len(steps) - cap})" if len(steps) > cap else "")


def module_of(name: str) -> str:
    return name.rpartition(".")[0] or name


def live(run: WatchRun) -> list[StepRecord]:
    """Steps that updated the weights from a gradient (not skipped by GradScaler, not a
    mean over no targets)."""
    return [r for r in run.steps if not r.skipped and not no_targets(r)]


def no_backward(run: WatchRun) -> bool:
    """Steps were taken and no backward ran in the whole run: every gradient in .grad was
    written by the script (evolution strategies, SPSA, one computed outside autograd)."""
    return (
        bool(run.steps) and not run.backward_calls and not any(r.backward_calls for r in run.steps)
    )


def no_targets(r: StepRecord) -> bool:
    """A NaN loss with every gradient exactly 0: a mean over no elements (0/0), a batch
    whose targets were all ignored or whose mask was empty. An overflow's NaN reaches the
    gradients; this one gave them nothing to learn from, and no trend is judged on it.
    Also a NaN loss under finite gradients an optimizer wrapper wrote (`empty_by_design`)."""
    if r.loss is None or not math.isnan(r.loss):
        return False
    return r.grad_norm == 0 or empty_by_design(r)


def empty_by_design(r: StepRecord) -> bool:
    """A NaN loss at a step whose finite gradients a wrapper wrote from its own sum: the
    NaN reached no per-sample gradient (a NaN in one would make the clipped sum NaN), so
    it is a mean over an empty batch, which Poisson sampling draws by design (DP-SGD: the
    update is the noise alone, and skipping it would break the privacy accounting)."""
    loss = r.loss
    return r.written and loss is not None and math.isnan(loss) and math.isfinite(r.grad_norm)


def after_warmup(run: WatchRun, t: Thresholds) -> list[StepRecord]:
    return [r for r in run.steps if r.step > t.warmup_steps]


@dataclass(frozen=True)
class Series:
    """The steps of one optimizer (or of the manual updates), judged on their own: a GAN's
    D and G steps interleave in `run.steps` but are two different series. Their losses
    are the objective, meant to fall: negated for an optimizer with maximize=True."""

    index: int
    steps: list[StepRecord]
    members: tuple[int, ...]
    """Positions in `run.params` of the parameters this optimizer steps."""
    name: str
    """"optimizer 1 (Adam)" when the run has several optimizers, else ""."""
    sign: float = 1.0
    """-1 where maximize=True negated the losses: `user` gives a message the script's own."""
    evaluations: bool = False
    """Each step is an external minimiser's evaluation of a fixed objective, its line
    search's trial points included (OptimizerSettings.evaluations)."""

    def user(self, loss: float) -> float:
        """A loss of these steps as the script computed it (its own sign)."""
        return self.sign * loss

    def say(self, message: str) -> str:
        """The message, prefixed with the optimizer's name when there are several."""
        return f"{self.name}: {message}" if self.name else message

    def subject(self, subject: str) -> str:
        return f"{subject} ({self.name})" if self.name else subject

    def live(self) -> list[StepRecord]:
        return [r for r in self.steps if not r.skipped and not no_targets(r)]

    def manual(self, run: WatchRun) -> bool:
        return self.index < len(run.optimizers) and run.optimizers[self.index] == MANUAL


def optimizer_name(run: WatchRun, index: int) -> str:
    return run.optimizer_label(index)


def several(run: WatchRun) -> bool:
    return len(run.store.optimizers() | set(range(len(run.optimizers)))) > 1


def by_optimizer(run: WatchRun) -> Iterator[Series]:
    """One series per optimizer that stepped, in index order; with a single optimizer the
    one series is the whole run and carries no name."""
    every = tuple(range(len(run.params)))
    named = several(run)
    for k in sorted(run.store.optimizers()):
        members = run.members_of(k) or every
        steps = run.store.of_optimizer(k)
        sign = -1.0 if run.maximizes(k) else 1.0
        if sign < 0:
            steps = [_ascended(r) for r in steps]
        settings = run.settings_of(k)
        evaluations = settings is not None and settings.evaluations
        name = optimizer_name(run, k) if named else ""
        yield Series(k, steps, members, name, sign, evaluations)


def _ascended(r: StepRecord) -> StepRecord:
    """The step with its loss negated: what an optimizer with maximize=True minimises."""
    return StepRecord.stored({**r.__dict__, "loss": None if r.loss is None else -r.loss})


def window(n: int) -> int:
    """Steps in a first or last window of a series of n: a fifth of it, 5 to 50."""
    return max(5, min(50, n // 5))


def middle_median(losses: Sequence[float], w: int) -> float:
    """The median of the w losses around the middle of the series."""
    mid = len(losses) // 2
    return statistics.median(losses[max(0, mid - w // 2) : mid + (w + 1) // 2])


def clip_note(steps: Sequence[StepRecord]) -> str:
    """What advice must know: whether the script already clips ("" if not), on scaled
    gradients ("scaled"), or at which max_norm (its median)."""
    clipped = [r for r in steps if r.max_norm is not None]
    if not clipped:
        return ""
    if any(r.scaled_clip for r in clipped):
        return "scaled"
    return num(statistics.median(r.max_norm for r in clipped if r.max_norm is not None))


def lr_text(r: StepRecord) -> str:
    """The step's learning rates, "/"-joined ("none" without any)."""
    return "/".join(num(v) for v in r.lrs) if r.lrs else "none"


def group_norms(run: WatchRun, r: StepRecord, members: Sequence[int]) -> dict[str, float]:
    """The gradient norm of each module (its parameters' norms combined) at one step."""
    sq: dict[str, float] = {}
    names = run.names()
    for i in members:
        v = r.param_norms[i] if i < len(r.param_norms) else None
        if v is not None and math.isfinite(v) and i < len(names):
            g = module_of(names[i])
            sq[g] = sq.get(g, 0.0) + v * v
    return {k: math.sqrt(v) for k, v in sq.items()}


def loss_steps(s: Series) -> tuple[list[StepRecord], list[float]]:
    """The series' live steps with a finite loss, and those losses."""
    steps = [r for r in s.live() if finite(r.loss)]
    return steps, [r.loss for r in steps if r.loss is not None]


def stalled(losses: Sequence[float], t: Thresholds) -> bool:
    """No improvement over the second half, or no fall of progress-min-fall overall."""
    if len(losses) < 10:
        return False
    w = window(len(losses))
    first = max(statistics.median(losses[:5]), statistics.median(losses[:w]))
    middle = middle_median(losses, w)
    last = statistics.median(losses[-w:])
    fell = first != 0 and (first - last) / abs(first) >= t.progress_min_fall
    if fell and last == 0:
        return False  # at exactly 0: a margin or hinge met, nothing left to improve
    return not fell or last >= middle - t.progress_min_fall * abs(first) / 2


def trained_matrices(run: WatchRun, s: Series) -> list[int]:
    """Weight matrices the optimizer trains: a bias or a norm's scale near 0 has a large
    ratio while healthy."""
    return [
        i
        for i in s.members
        if i < len(run.params)
        and len(run.params[i].shape) >= 2
        and run.params[i].requires_grad
        and run.params[i].in_optimizer
    ]


def robust_sigma(values: Sequence[float]) -> float:
    """The noise of a series from its step-to-step differences (MAD), so a falling trend
    is not mistaken for noise; /√2 because a difference holds two draws."""
    diffs = [b - a for a, b in itertools.pairwise(values)]
    if not diffs:
        return 0.0
    return MAD_SIGMA * statistics.median(abs(d) for d in diffs) / math.sqrt(2)


def spikes(values: Sequence[float], t: Thresholds) -> list[tuple[int, float, float]]:
    """(index, value, baseline median) of each value far above its trailing window.

    From `spike_min_history` on the window is the last `spike_window` values; before it,
    the first steps are judged against their own history (all values before, at least
    `EARLY_MIN_HISTORY` of them) with the stricter ratio `spike_early_ratio`, since a few
    values give a rough median and a freshly initialised model moves fast."""
    logged = all(v > 0 for v in values)
    xs = [math.log(v) if logged else v for v in values]
    window = max(int(t.spike_window), 2)
    out: list[tuple[int, float, float]] = []
    history = int(t.spike_min_history)
    start = min(EARLY_MIN_HISTORY, history) if t.spike_early_ratio > 0 else history
    for i in range(max(start, 1), len(xs)):
        early = i < history
        base = xs[max(0, i - window) : i]
        ratio = max(t.spike_early_ratio, t.spike_min_ratio) if early else t.spike_min_ratio
        if logged and xs[i] - min(base) <= math.log(ratio):
            continue  # not above its window's least by the ratio, so not above its median
        med = statistics.median(base)
        if not logged and med == 0:
            continue  # a window at exactly 0 (a hinge met, no gradient) has no multiple
        sigma = MAD_SIGMA * statistics.median(abs(x - med) for x in base)
        if not logged:  # two levels in turn (PPO's epochs: ratio 1, then not) hide from a
            sigma = max(sigma, robust_sigma(base))  # MAD, not from the steps' differences
        jump = xs[i] - med
        if not logged and early and _within_swing(base, med, xs[i], ratio):
            continue
        if not logged and early and jump <= t.spike_sigma * _later_sigma(xs, history):
            continue
        ratio_ok = jump > math.log(ratio) if logged else jump > (ratio - 1) * abs(med)
        if not logged and ratio_ok and _drifted(xs, i, out, t.spike_sigma * sigma):
            continue
        if jump > t.spike_sigma * sigma and ratio_ok:
            out.append((i, values[i], math.exp(med) if logged else med))
    return out


def _within_swing(base: Sequence[float], med: float, value: float, ratio: float) -> bool:
    """In the first steps, a value of a series that swings both ways around 0 (its median
    nearer 0 than its lowest value is below the median: a group-normalised policy surrogate,
    GRPO's, whose sign is the batch's advantages') no more than `ratio` times the largest
    magnitude those few steps reached: a multiple of a median near 0 says nothing, and a
    handful of steps has no robust spread, so their own swing is the scale."""
    low = med - min(base)
    return abs(med) <= low and value <= ratio * max(abs(b) for b in base)


def _later_sigma(xs: Sequence[float], history: int) -> float:
    """The robust spread (MAD) of a series that is not all positive, over its steps past
    the first `history`: the scale its first steps are judged on too, since a handful of
    steps has none (a score-function loss, (r - b)·log π, starts near 0 while its
    baseline catches up, and swings as far on its own later); 0 before enough steps."""
    later = xs[history:]
    if len(later) < history:
        return 0.0
    med = statistics.median(later)
    return MAD_SIGMA * statistics.median(abs(x - med) for x in later)


def _drifted(
    xs: Sequence[float], i: int, found: list[tuple[int, float, float]], jump: float
) -> bool:
    """A signed value (a loss that crosses 0: a hinge GAN's -D(G(z)), a negated objective)
    no higher than `jump` above the last few steps before it that were no spike: it
    drifted there. Its multiple of a median near 0 says nothing, so only the jump from
    where the series just was tells a spike from a trend the rolling median lags behind."""
    before: list[float] = []
    j, k = i - 1, len(found) - 1  # found is in order: walked back beside j
    while j >= 0 and len(before) < EARLY_MIN_HISTORY:
        while k >= 0 and found[k][0] > j:
            k -= 1
        if k < 0 or found[k][0] != j:
            before.append(xs[j])
        j -= 1
    return bool(before) and xs[i] - statistics.median(before) <= jump


def inspect_command(run: WatchRun, step: int) -> str:
    """The command that stops the script at that step and explains its gradients: the
    script's own arguments when watch ran it, ARGS only when they are unknown."""
    label = run.label
    script = label[len("script ") :] if label.startswith("script ") else "SCRIPT"
    command = f"gradscope inspect --script {shlex.quote(script)} --step {step}"
    if run.argv is None:
        return command + " -- ARGS"
    return command + (" -- " + shlex.join(run.argv) if run.argv else "")


def chance_level(run: WatchRun, s: Series) -> float | None:
    """The step loss of a uniform guess (ln C per target, times the backward calls of a
    step: accumulated micro-batches add up), when the loss is a cross-entropy."""
    kind = run.loss_kind(s.index)
    level = kind.uniform() if kind is not None else None
    if level is None or level <= 0 or not s.steps:
        return None
    return level * statistics.median(r.backward_calls or 1 for r in s.steps)


def at_chance(run: WatchRun, s: Series, value: float) -> str:
    """ "; it sits at ln 27 = 3.30, the loss of a uniform guess over 27 classes" when the
    value is within 3% of that level; "" otherwise."""
    level = chance_level(run, s)
    kind = run.loss_kind(s.index)
    if level is None or kind is None or abs(value - level) > 0.03 * level:
        return ""
    classes = kind.terms[0].classes
    return (
        f"; it sits at {num(level)}, the loss of a uniform guess over {classes} classes "
        f"(ln {classes} = {math.log(classes or 1):.3g} per target): the model predicts nothing"
    )


REGRESSION = ("mse", "l1", "pinball", "huber", "smooth_l1")
"""Loss kinds whose targets may be the model's own estimates (bootstrapped value targets,
TD errors): they move as the model learns, so the loss can rise or jump while it learns."""


def trend_doubt(run: WatchRun, s: Series) -> str | None:
    """Why the series' loss says nothing by its trend, or None when it does: only a single
    recognised objective (every term of one kind and sign) says what better means. A custom
    or a multi-term objective (a policy gradient minus an entropy bonus plus a value MSE)
    may rise or stay flat while the model learns."""
    kind = run.loss_kind(s.index)
    if kind is None or not kind.terms:
        return "the loss's kind is unknown (a custom objective), so its level says nothing alone"
    if not kind.known:
        return (
            f"the loss ({kind.describe()}) has terms gradscope did not recognise, so its "
            "level says nothing alone"
        )
    if len({(t.kind, t.negated) for t in kind.terms}) > 1:
        return (
            f"the loss ({kind.describe()}) sums several objectives, which may trade off "
            "against each other as the model learns"
        )
    if kind.own_targets():
        return (
            "a term of the loss targets another term's input, detached (a VQ-VAE's codebook "
            "and commitment losses pull the encoder's output and the codebook toward each "
            "other): both move as the model learns, so the loss's level says nothing alone"
        )
    if any(r.positional and r.optimizer == s.index for r in run.state_facts.repeats):
        return (
            "its targets are places in the batch (0..n-1, or one index throughout): a "
            "contrastive loss, whose classes are other samples' embeddings (a queue's, a "
            "momentum encoder's), harder as the encoder learns, so its level says nothing alone"
        )
    return objective_moves(run, kind, s.steps)


def regression_like(run: WatchRun, s: Series) -> bool:
    """The loss has a regression term (REGRESSION) or one gradscope did not recognise."""
    kind = run.loss_kind(s.index)
    if kind is None or not kind.terms or kind.unknown_terms:
        return True
    return any(t.kind in REGRESSION for t in kind.terms)


def values_changed(p: ParamInfo) -> bool | None:
    """Its norm moved between the first step and the end (by a relative 1e-6: more than
    rounding), which for a parameter no optimizer moves means a copy did (a target or EMA
    network); None: one of the two was not read."""
    first, last = p.weight_norm, p.last_norm
    if first is None or last is None or not (math.isfinite(first) and math.isfinite(last)):
        return None
    return abs(last - first) > 1e-6 * max(abs(first), abs(last), 1e-12)
