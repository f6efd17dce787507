"""Verdicts over time (GS4xx): pure functions of a recorded `WatchRun`, no torch.

Each rule reads the per-step series and returns findings whose evidence names
steps, values and parameters. Thresholds come from config.Thresholds. With several
optimizers (a GAN's D and G) each optimizer's steps are judged as their own series and
the finding names the optimizer. This module holds the first rules of a run's series:
non-finite steps and spikes of the loss (GS401, GS402) and the spike test the gradient
norm's GS403 shares (step_norm_spike.py), with spikes_by_design.py telling the spikes of a
moving target or a game from faults;
step_trends.py the trends (GS404, GS405), step_blowup.py the early blow-up (GS414),
step_progress.py whether the run got better and what stopped learning (GS415, GS417),
step_setup.py how the run is set up (update ratios, resets; AMP: step_amp.py),
step_outside.py the parameters outside every optimizer.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Mark, Rule, Severity, Threshold
from gradscope.fmt import listed, num
from gradscope.rules.norm_level import in_new_level, interleaved, loss_in_level
from gradscope.rules.registry import DECLARED, Stage, rule
from gradscope.rules.signed_sum import signed_sum_spikes
from gradscope.rules.spikes_by_design import (
    Spike,
    held_level,
    recovered_advice,
    recovered_at_once,
    stands_apart,
)
from gradscope.rules.step_blowup import early_blowup_of
from gradscope.rules.step_common import (
    Series,
    about,
    by_optimizer,
    clip_note,
    empty_by_design,
    finite,
    inspect_command,
    no_targets,
    optimizer_name,
    several,
    spikes,
    step_list,
    trend_doubt,
)
from gradscope.steps.records import StepRecord, WatchRun

__all__ = [
    "batch_apart",
    "series_spike_steps",
    "series_spikes",
    "spike_advice",
    "spike_steps",
    "spikes",
]


# -- GS401 -----------------------------------------------------------------------------
def _bad_params(run: WatchRun, r: StepRecord) -> list[str]:
    if r.skipped:
        return []
    return [
        n
        for n, v in zip(run.names(), r.param_norms, strict=False)
        if v is not None and not math.isfinite(v)
    ]


EMPTY = (
    "a mean over no elements (0/0): every target of the batch ignored (ignore_index, "
    "labels of -100) or an empty mask or selection; the weights got no gradient from it"
)
EMPTY_FIX = (
    "look at how the batch's targets or mask are made (a masking rate, a padding or "
    "truncation that leaves no label); skip a batch with none, or divide the summed loss "
    "by max(count, 1)"
)


def _inspect_advice(run: WatchRun, r: StepRecord) -> str:
    """At step 1 no update has run: the batch, the loss or the forward as built made it."""
    check = (
        f"check the batch of step {r.step} and the learning rate"
        if r.step > 1
        else "no update ran before it, so not the learning rate: check the batch, the loss's "
        "arithmetic (a log or division at 0, a -inf mask times 0) and the forward's (a growing "
        "recurrence: Mamba's dt not through softplus, A = exp(A_log) without its minus)"
    )
    return (
        f"run `{inspect_command(run, r.step)}`"
        + (" (ARGS: the script's own arguments) " if run.argv is None else " ")
        + f"to stop at that step's backward and name the op that made the first NaN/Inf; {check}"
    )


def _non_finite(r: StepRecord) -> bool:
    bad_loss = r.loss is not None and not math.isfinite(r.loss) and not empty_by_design(r)
    return bad_loss or (not r.skipped and not math.isfinite(r.grad_norm))


@rule(
    "GS401",
    "non-finite-step",
    Severity.ERROR,
    "exploding",
    Stage.WATCH,
    "watch: the first step whose loss or gradients hold NaN/Inf (not a skipped AMP step), and the "
    "parameters that went first",
    example="a batch with a NaN in it, or a learning rate that overflows the weights",
    fix="`gradscope inspect --script train.py --step N -- ARGS` stops at that step's backward and "
    "names the op that made the first NaN/Inf; check that batch and the learning rate",
    objectives=(
        "any: a NaN or Inf in the loss or the gradients is a fault whatever the loss means"
    ),
    mark=Mark("non-finite", "x"),
)
def non_finite(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """The first step whose loss is NaN/Inf, or whose gradients hold NaN/Inf elements (norms add
    up in float64, so an infinite norm means infinite elements); steps GradScaler skipped are
    AMP's (GS407). It names the first parameters that went non-finite and how many steps did;
    a NaN loss with every gradient 0 is a mean over no elements (0/0), named so (no fault
    under finite gradients a wrapper wrote: DP-SGD's empty Poisson batch)."""
    # The first step with a non-finite loss, or with gradient elements that are NaN/Inf (norms
    # are accumulated in float64, so an infinite norm means infinite elements).
    for r in (x for x in run.steps if not empty_by_design(x)):
        bad_loss = r.loss is not None and not math.isfinite(r.loss)
        bad = _bad_params(run, r)
        if not bad_loss and not bad and (r.skipped or math.isfinite(r.grad_norm)):
            continue
        count = sum(1 for x in run.steps if _non_finite(x))
        prev = next((p for p in reversed(run.steps) if p.step < r.step), None)
        evidence = [f"step {r.step}: loss {num(r.loss)}, total gradient norm {num(r.grad_norm)}"]
        if bad:
            evidence.append(f"first parameters with non-finite gradient elements: {listed(bad, 6)}")
        if prev is not None:
            evidence.append(
                f"step {prev.step} before it: loss {num(prev.loss)}, norm {num(prev.grad_norm)}"
            )
        evidence.append(f"{count} of {len(run.steps)} recorded steps were non-finite")
        if bad_loss:
            what = "the loss became non-finite" + (
                " (and with it the gradients)" if bad or not math.isfinite(r.grad_norm) else ""
            )
        else:
            what = "the gradients became non-finite (NaN/Inf elements) while the loss was " + num(
                r.loss
            )
        who = f" ({optimizer_name(run, r.optimizer)})" if several(run) else ""
        message = f"{what} at step {r.step}{who} (first of {count} such steps)"
        if no_targets(r):
            message = f"{message}, with every gradient exactly 0: {EMPTY}"
        finding = this.finding(
            bad[0] if bad else "loss",
            message,
            EMPTY_FIX if no_targets(r) else _inspect_advice(run, r),
            value=float(r.step),
            evidence=tuple(evidence),
        )
        return [about(finding, [r.step, *(x.step for x in run.steps if _non_finite(x))])]
    return []


# -- GS402 / GS403 ---------------------------------------------------------------------
def series_spikes(
    s: Series, t: Thresholds, kind: str
) -> tuple[list[StepRecord], list[tuple[int, float, float]]]:
    """The series' steps with a finite value (for the norm, a non-zero one: a step with no
    gradient at all, GRPO's batch whose every group drew one reward, is no level to spike
    from) and the spikes among them; the first steps' spikes are left out where GS414
    explains them as an early blow-up; the norm's that rose to a level it held while the
    loss fell (`held_level`, `in_new_level`): a trend. None among a scipy minimiser's
    evaluations of one objective: its line search's trial points (a NaN is GS401's)."""
    if kind == "loss":
        steps = [r for r in s.live() if finite(r.loss)]
        values = [r.loss for r in steps if r.loss is not None]
    else:
        steps = [r for r in s.live() if finite(r.grad_norm) and r.grad_norm]
        values = [r.grad_norm for r in steps]
    found = [] if s.evaluations else spikes(values, t)
    if found and found[0][0] < t.spike_min_history and early_blowup_of(s, t) is not None:
        found = [f for f in found if f[0] >= t.spike_min_history]
    if kind == "norm":
        kept = [
            f
            for f in found
            if not held_level(s, steps, values, f[0]) and not in_new_level(s, steps, values, f, t)
        ]
        found = [] if not kept else kept if not interleaved(s) else found
    return steps, found


def series_spike_steps(s: Series, t: Thresholds, kind: str) -> set[int]:
    """The steps of one optimizer's series GS402 ("loss") or GS403 ("norm") calls spikes."""
    steps, found = series_spikes(s, t, kind)
    return {steps[i].step for i, _, _ in found}


def spike_steps(run: WatchRun, t: Thresholds, kind: str) -> list[int]:
    """The steps GS402 ("loss") or GS403 ("norm") calls spikes, every optimizer's: what
    the views mark."""
    out: list[int] = []
    for s in by_optimizer(run):
        steps, found = loss_spikes(run, s, t) if kind == "loss" else series_spikes(s, t, kind)
        out.extend(steps[i].step for i, _, _ in found)
    return sorted(out)


def loss_spikes(
    run: WatchRun, s: Series, t: Thresholds
) -> tuple[list[StepRecord], list[tuple[int, float, float]]]:
    """GS402's spikes: series_spikes of the loss, less those of a climb where the loss's
    level says nothing alone (trend_doubt): in a level their neighbours share, which the
    loss then held (loss_in_level), not a jump it came back from (a moving target's
    recurring jumps stay, to be read as a whole: spikes_by_design)."""
    steps, found = series_spikes(s, t, "loss")
    if found and trend_doubt(run, s) is not None:
        values = [r.loss or 0.0 for r in steps]
        found = [f for f in found if not loss_in_level(s, steps, values, f, t)]
    return steps, found


@rule(
    "GS402",
    "loss-spike",
    Severity.WARNING,
    "spike",
    Stage.WATCH,
    "watch: the loss jumped far above its rolling median (median/MAD)",
    example="one corrupted batch at step 150",
    fix="look at the batches of those steps; if the gradient norm spiked too, clip it or lower "
    "the learning rate",
    thresholds=(
        Threshold(
            "spike-window",
            128,
            "`watch`: steps in the rolling median/MAD baseline of the loss and the gradient norm",
            above_zero=True,
        ),
        Threshold(
            "spike-sigma",
            6.0,
            "a value this many robust sigmas (1.4826·MAD, in log space for positive series) above"
            " the rolling median...",
            above_zero=True,
        ),
        Threshold(
            "spike-min-ratio",
            2.0,
            "...and at least this many times the rolling median is a spike",
            above_zero=True,
        ),
        Threshold("spike-min-history", 32, "steps of baseline needed before a spike can be called"),
        Threshold(
            "spike-early-ratio",
            5.0,
            "in the first `spike-min-history` steps a spike must also be this many times the "
            "median of the steps before it (a fresh model's norm doubles early; 0: no early test)",
        ),
    ),
    command="gradscope watch gradscope/examples/train_buggy.py",
    objectives=(
        "any, by its own values (with maximize=True, the loss it ascends, as the script "
        "printed it): a single spike, one that does not come back or one followed by NaN "
        "is a warning; spikes that recur and come back at once (for a model trained on its "
        "own predictions, a batch after it does: the rest replay) are information where the "
        "loss has a regression term (MSE, L1, pinball, Huber, smooth L1) or one not "
        "recognised: bootstrapped value targets jump by design; recurring spikes of a sum of "
        "terms that takes both signs near 0 (PPO's policy, value and entropy terms) are "
        "information too; where the loss's level says nothing alone (a custom or multi-term "
        "objective, terms that target each other's inputs as a VQ-VAE's, a model trained on "
        "its own predictions, an adversary's loss another optimizer ascends) a climb the "
        "rolling median lags, each step in line with the steps around it, is no spike"
    ),
    mark=Mark("loss spike", "v"),
)
def loss_spike(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A step's loss above the median of the previous spike-window steps by more than
    spike-sigma robust sigmas (median absolute deviation; for a loss that takes other values
    than positive ones, at least the noise of its step-to-step differences: two levels in
    turn, as PPO's epochs over one rollout, hide from the deviation) and spike-min-ratio
    times that median (on a log scale for positive losses); before spike-min-history steps a
    spike is spike-early-ratio times the median of the steps before it. Spikes that an early blow-up
    explains are left to GS414. Information, not a warning, where spikes recur (3 or more),
    each comes back at once (at most 5 spiking steps in a row, and the median of the next 5
    steps that are not spikes at least halfway back to the median it jumped from), no loss
    is non-finite and the loss has a regression term or an unrecognised one (mse, l1,
    pinball, huber, smooth_l1, a custom objective), none far above the others (spike-sigma
    robust sigmas and spike-min-ratio over their median jump): bootstrapped value targets jump at
    every episode end by design, bounded by the values the model predicts (a last spike the
    run ended on is not held against them). A single spike, one that does not come back,
    one far above the others (a corrupted batch: named alone, at its step, where the others
    are by design) or one followed by NaN stays a warning."""
    out = []
    for s in by_optimizer(run):
        steps, found = loss_spikes(run, s, t)
        if not found:
            continue
        where = [steps[i].step for i, _, _ in found]
        i, value, med = max(found, key=_height(steps))
        early = " (against the steps before it: the first steps)" if i < t.spike_min_history else ""
        finding = this.finding(
            s.subject("loss"),
            s.say(
                f"the loss spiked at {len(found)} step(s): step {steps[i].step} reached "
                f"{num(s.user(value))} against a rolling median of {num(s.user(med))}{early}"
                + (" (maximize=True: the loss it ascends fell)" if s.sign < 0 else "")
            ),
            "look at the batches of those steps; if the gradient norm spiked too, lower "
            "the learning rate"
            + {
                "": " or clip",
                "scaled": " (and fix the clipping: see clip-before-unscale)",
            }.get(clip_note(s.steps), " (clipping is already on)"),
            value=value,
            threshold=med,
            evidence=(f"spike steps: {step_list(where)}",),
        )
        out.append(_loss_judged(run, s, t, (steps, found), finding))
    return out


def _height(steps: list[StepRecord]):
    """How far a spike stands: its multiple of the median for a positive loss, its jump over
    the median for a loss that reaches 0 or below (as `spikes` judges each): a multiple of a
    median near 0 ranks by the median."""
    if all(r.loss is not None and r.loss > 0 for r in steps):
        return lambda f: f[1] / f[2] if f[2] else f[1]
    return lambda f: f[1] - f[2]


def _loss_judged(
    run: WatchRun,
    s: Series,
    t: Thresholds,
    spiked: tuple[list[StepRecord], list[Spike]],
    finding: Finding,
) -> Finding:
    """The GS402 finding as information where its spikes are a moving target's, or named at
    the batch that stands apart from them."""
    steps, found = spiked
    where = [steps[i].step for i, _, _ in found]
    norms = series_spike_steps(s, t, "norm")
    held = [f for f in series_spikes(s, t, "loss")[1] if f not in found]  # a climb's
    recovered = recovered_at_once(run, s, steps, found, t, held)
    odd, apart = ([], "") if recovered else stands_apart(run, s, steps, found, t)
    if apart:
        finding = batch_apart(finding, odd, apart)
        where = odd
    if recovered:
        finding = replace(
            finding,
            severity=Severity.INFO,
            advice=recovered_advice(s),
            evidence=(*finding.evidence, recovered),
        )
    signed = "" if recovered or apart else signed_sum_spikes(run, s, steps, found, norms, t)
    if signed:
        finding = replace(
            finding,
            severity=Severity.INFO,
            advice="not a fault by itself: a sum of terms of both signs near 0 says more by "
            "its terms and by the return or score the run reaches; if those fell at these "
            "steps, look at their batches",
            evidence=(*finding.evidence, signed),
        )
    return about(finding, where)


def batch_apart(finding: Finding, odd: list[int], facts: str) -> Finding:
    """A spike or two far above a moving target's own: the fault is that batch."""
    return replace(
        finding,
        advice=f"look at the batch of step {odd[0]} (a reward, target or loss scaled by "
        "mistake, a corrupted sample): the other spikes are a moving target's, by design",
        evidence=(*finding.evidence, facts),
    )


def spike_advice(s: Series, at: StepRecord) -> str:
    clip = clip_note(s.steps)
    if clip == "scaled":
        return (
            "clipping ran on scaled gradients and so did not bound them (see "
            "clip-before-unscale); once it is fixed, lower the learning rate or lengthen "
            f"warm-up if the spikes remain; look at the batch of step {at.step}"
        )
    if clip:
        return (
            f"the script already clips (max_norm {clip}), which caps the step but not its "
            "cause: lower the learning rate or lengthen warm-up, and look at the batch of "
            f"step {at.step}"
        )
    return (
        "clip the gradient norm (torch.nn.utils.clip_grad_norm_), lower the learning rate "
        f"or lengthen warm-up; look at the batch of step {at.step}"
    )
