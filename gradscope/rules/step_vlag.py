"""Adam's second moment lagging a sudden large gradient (GS451). No torch.

Adam divides each step by √v̂, a moving average of past squared gradients with a long
memory (β2 = 0.999: about 1,000 steps). A gradient far above that history passes almost
undivided: the update of that step is up to √(1/(1-β2)) ≈ 32 times its usual size, and
the momentum carries it into the next steps; loss spikes follow within 1-8 steps
(Wortsman et al. 2023; StableAdamW's RMS_t = √mean(g²/v̂) is ~1 on a healthy step). The
recorded gradient norms give that ratio for the whole gradient and for each tensor at
every step, free (vlag_tensors.py).
"""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import RULES, Finding, Severity
from gradscope.fmt import num
from gradscope.rules.registry import Stage, When, rule
from gradscope.rules.step_common import Series, about, by_optimizer, step_list
from gradscope.rules.step_norm_spike import norm_spikes_bounded, norm_spikes_by_design
from gradscope.rules.steps import series_spike_steps
from gradscope.rules.symptoms import GROWTH
from gradscope.rules.vlag_tensors import lagged_tensors, state_evidence, tensor_rms_t
from gradscope.steps.records import StepRecord, WatchRun

RMS_LIMIT = 5.0
"""The gradient norm at least this many times the root of its own moving second moment."""

FOLLOW_STEPS = 8
"""Steps within which the loss spikes that a lagged second moment leads to come (1-8)."""


def _beta2(run: WatchRun, index: int) -> float | None:
    settings = run.settings_of(index)
    if settings is None or settings.update != "adam":  # Lion's β2 is no second moment's
        return None
    return max(g.betas[1] for g in settings.groups if g.betas is not None)


def rms_t(steps: list[StepRecord], beta2: float) -> list[tuple[StepRecord, float]]:
    """Per live step with a finite norm: the norm Adam's state saw (after the script's
    clip) over √v̂, v̂ the bias-corrected moving average of those norms² up to and
    including the step, as Adam's own v̂ includes the step's gradient."""
    out = []
    v, t = 0.0, 0
    for r in steps:
        g = r.clipped_norm if r.clipped_norm is not None else r.grad_norm
        if r.skipped or not math.isfinite(g):
            continue
        t += 1
        v = beta2 * v + (1 - beta2) * g * g
        hat = v / (1 - beta2**t)
        out.append((r, g / math.sqrt(hat) if hat > 0 else 0.0))
    return out


@rule(
    "GS451",
    "adam-v-lag",
    Severity.WARNING,
    "precursor",
    Stage.WATCH,
    "watch (precursor): under Adam, a gradient spike far above the root of Adam's moving "
    "second moment (StableAdamW's RMS_t): that step's update was many times its usual size",
    example="one batch whose gradient is 1000× the usual (a loss scaled by mistake, an outlier "
    "batch) under AdamW with β2 = 0.999",
    fix="clip the gradient norm (or StableAdamW's update clipping), a lower β2 (0.95) so that "
    "v follows faster, a larger eps; look at the batch of that step",
    objectives=(
        "any, under an Adam-like optimizer: the gradient against Adam's own moving second moment"
    ),
    explains=(*GROWTH, "GS450"),
    explains_when=When.BEFORE,
)
def adam_v_lag(run: WatchRun, t: Thresholds) -> list[Finding]:
    """Under an Adam-like optimizer (betas in its settings), at a step GS403 calls a spike of
    the total gradient norm, that norm (after the script's clip, as Adam saw it) is at least
    5 times the root of its own bias-corrected moving average of squares with the
    optimizer's β2: the tensor-level RMS_t of StableAdamW, about 1 on a healthy step. Adam's
    √v̂ lags such a gradient, so that step's update is far larger than usual (RMS_t is at
    most √(1/(1-β2))) and the momentum carries it on; named at that step, whose update
    applied it. It names the tensors whose own RMS_t, ‖g‖/√Σv̂ from their recorded norms
    (Σv is the moving average of the tensor's squared norm), is past 5 there, or says every
    tensor jumped alike (the whole gradient scaled); its evidence gives their update RMS
    over the lr, read from Adam's state at the first measured step at or after it
    (normally 0.2-0.3: the update the lag made). Under SGD, or with the spike clipped to
    the usual size, it is silent;
    information where GS403 calls the spikes so (a game's turns, a moving target's jumps):
    Adam's lag is then part of the design, and the run came back from it; information too
    where GS403 calls each spike a lone step the optimizer bounded (no loss spike, the loss
    kept falling) and FOLLOW_STEPS steps or more came after a lagged one at least as large
    as any: the loss spikes the lag leads to had time to come and did not (a DEQ's implicit
    backward, an unrolled inner loop: a batch's gradient jumps alone)."""
    out = []
    for s in by_optimizer(run):
        beta2 = _beta2(run, s.index)
        if beta2 is None:
            continue
        spiked = series_spike_steps(s, t, "norm")
        lagged = [(r, x) for r, x in rms_t(s.live(), beta2) if r.step in spiked and x >= RMS_LIMIT]
        if not lagged:
            continue
        found = _finding(run, s, lagged, beta2)
        if norm_spikes_by_design(run, s, t):
            found = _by_design(found)
        elif _seen_harmless(s, lagged) and norm_spikes_bounded(run, s, t):
            found = _bounded(found)
        out.append(found)
    return out


def _seen_harmless(s: Series, lagged: list[tuple[StepRecord, float]]) -> bool:
    """A lagged step had FOLLOW_STEPS live steps or more after it (its consequence could be
    seen), and those the run ended too soon after were no larger than the seen ones."""
    steps = [r.step for r in s.live()]
    seen = [x for r, x in lagged if sum(1 for k in steps if k > r.step) >= FOLLOW_STEPS]
    return bool(seen) and max(x for _, x in lagged) <= max(seen)


def _bounded(finding: Finding) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}; it did not: each spike was one step's, no loss spike "
        f"followed within {FOLLOW_STEPS} steps, and the loss kept falling",
        advice="nothing to do for a lone spike: Adam's momentum spread it over the next "
        "steps and the loss did not jump; if spikes repeat and the loss jumps with them, "
        + finding.advice,
    )


def _by_design(finding: Finding) -> Finding:
    return replace(
        finding,
        severity=Severity.INFO,
        advice="not a fault by itself: the spikes are by design (see norm-spike) and the run "
        "came back from each; if the loss spikes after them grow, " + finding.advice,
    )


def _finding(
    run: WatchRun, s: Series, lagged: list[tuple[StepRecord, float]], beta2: float
) -> Finding:
    first, x = lagged[0]
    bound = math.sqrt(1 / (1 - beta2))
    ratios = tensor_rms_t(s.steps, first.step, beta2, s.members)
    tensors, per_tensor, named = lagged_tensors(ratios, run.names(), RMS_LIMIT)
    own = [x for x in run.state_facts.adam if x.optimizer == s.index]
    per_tensor += state_evidence(own, first.step, named, run.names())
    finding = RULES["GS451"].finding(
        s.subject("optimizer-state"),
        s.say(
            f"Adam's second moment lagged a sudden large gradient at step {first.step}: "
            f"the gradient norm {num(first.grad_norm)} was {x:.1f}× the root of its moving "
            f"second moment (β2 = {beta2:g}; StableAdamW's RMS_t, about 1 on a healthy "
            f"step){tensors}: Adam divided that step's gradient by a √v̂ that had not caught "
            f"up, and its momentum carries the large step on (RMS_t is at most {bound:.0f} "
            "at this β2; precursor: the loss spikes within a few steps)"
        ),
        f"look at the batch of step {first.step}; clip the gradient norm (or use "
        "StableAdamW's update clipping), or a lower β2 (0.95) so that v follows faster",
        value=x,
        threshold=RMS_LIMIT,
        evidence=(
            f"steps with RMS_t ≥ {RMS_LIMIT:g}: {step_list([r.step for r, _ in lagged])}",
            f"first certain at step {first.step}",
            *per_tensor,
        ),
    )
    return about(finding, [first.step])
