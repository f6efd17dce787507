"""A spike in one layer that the total gradient norm hides (GS450). No torch.

A batch that fills a normally empty input column, or a one-step penalty on one layer's
weights, makes that layer's gradient jump 100× its own median while the total norm moves
4-12×: GS403 judges the total, and a total in a noisy run or in the first steps may not
pass its test. Each tensor is judged against its own history (steps/layer_spikes.py, every
live step seen); the finding names the layer and the step.
"""

from __future__ import annotations

import math
from dataclasses import replace

from gradscope.config import Thresholds
from gradscope.findings import Finding, Rule, Severity
from gradscope.fmt import num
from gradscope.rules.layer_levels import level_change, spikes_first
from gradscope.rules.registry import DECLARED, Stage, When, rule
from gradscope.rules.step_common import (
    Series,
    about,
    by_optimizer,
    clip_note,
    module_of,
    step_list,
)
from gradscope.rules.steps import series_spike_steps
from gradscope.steps.layer_spikes import LayerSpike
from gradscope.steps.records import WatchRun

LAYER_RATIO = 20.0
"""A tensor's norm at least this many times its own median (over its last 64 steps)."""
LAYER_HIGH = 4.0
"""...and at least this many times its own 90th percentile there: a tensor often far above
its median (gradients that reach it on some batches only) is not spiking when it is."""
LAYER_ALONE = 2.0
"""...and at least this many times as far as the rest of the gradient moved: its own jump,
not a whole gradient scaled by a batch (heavy-tailed targets move every layer alike, and
the total's own history judges that: GS403)."""
LAYER_SHARE = 1.0
"""...and at least this many times the total norm's median: the jump alone is as large as
the whole gradient usually is (a bias whose tiny gradient jumps moves nothing)."""


@rule(
    "GS450",
    "layer-spike",
    Severity.WARNING,
    "spike",
    Stage.WATCH,
    "watch: one layer's gradient norm jumped far above its own median while the total norm "
    "moved much less; the layer and the step named",
    example="a batch that fills a normally empty input column: the first layer's gradient "
    "jumps 100× at step 150 while the total moves 4×",
    fix="look at the batch of that step (an input feature or token the run rarely sees) and "
    "at what touches that layer alone (a one-step penalty, a freshly unfrozen layer); clip "
    "the gradient norm if such batches are expected",
    thresholds=("spike-sigma",),
    objectives="any: each layer's gradient norm against its own history, not the loss",
    explains=("GS402", "GS403"),
    explains_when=When.AT_ITS_STEPS,
)
def layer_spike(run: WatchRun, t: Thresholds, *, this: Rule = DECLARED) -> list[Finding]:
    """A tensor's gradient norm at least 20 times the median of its own last 64 live steps,
    4 times their 90th percentile, and spike-sigma robust sigmas above the median (its log
    norm's median absolute deviation),
    judged on every live step from the 17th on, whose norm alone is at least the total
    norm's median there, which moved at least twice as far as the rest of the gradient
    did, at a step where the total norm is no spike (GS403's, whose
    evidence names the layers that drove it). Per-layer noise of that size is not seen
    in healthy training; a loss spike at the same step points to the layer. Below a
    floor on a loss term (free nats), or where each jump stayed at its new level over the
    16 steps after it (a bias before a BatchNorm switched to running statistics),
    information. Not for an optimizer that holds one tensor (Pyro builds one per
    parameter): nothing of its own gradient is left to hide that tensor's spike."""
    out = []
    names = run.names()
    # not a scipy minimiser's evaluations (see steps.series_spikes), nor one tensor alone
    for s in (s for s in by_optimizer(run) if not s.evaluations and len(s.members) != 1):
        found = _found(run, s, names, t)
        if not found:
            continue
        worst = max(found, key=lambda x: x.ratio)
        layer = module_of(names[worst.tensor])
        moved = worst.total / worst.total_median if worst.total_median > 0 else float("inf")
        evidence = [
            f"step {x.step}: {names[x.tensor]} {num(x.value)} against its median "
            f"{num(x.median)} ({x.ratio:.0f}×); total norm {num(x.total)} against "
            f"{num(x.total_median)} ({x.total / x.total_median:.1f}×), the rest of the "
            f"gradient {rest_moved(x):.1f}×"
            for x in found[:6]
            if x.total_median > 0
        ]
        where = sorted({x.step for x in found})
        finding = this.finding(
            s.subject(layer),
            s.say(
                f"the gradient of `{layer}` spiked to {worst.ratio:.0f}× its own median at "
                f"step {worst.step} ({num(worst.value)} against {num(worst.median)}); "
                f"the total norm moved {moved:.1f}×"
                + (f"; {len(where)} steps with such a layer spike" if len(where) > 1 else "")
            ),
            f"look at the batch of step {worst.step} (an input feature or token the run "
            f"rarely sees reaches `{layer}` there) and at anything that acts on `{layer}` "
            f"alone at that step{_clip_advice(clip_note(s.steps))}",
            value=worst.ratio,
            threshold=LAYER_RATIO,
            evidence=(f"layer spike steps: {step_list(where)}", *evidence),
        )
        finding = level_change(found, _floored(run, found, finding, layer), layer)
        out.append(about(finding, where))
    return out


def _found(run: WatchRun, s: Series, names: list[str], t: Thresholds) -> list[LayerSpike]:
    """The optimizer's jumps that pass, at steps where the total norm is no spike; those
    that came back down first (a jump that stayed is a level: rules/layer_levels.py)."""
    total = series_spike_steps(s, t, "norm")
    return spikes_first(
        [
            x
            for x in run.store.layers.found(s.index)
            if x.step not in total and _passes(x, s.members, names, t)
        ]
    )


def _floored(run: WatchRun, found: list[LayerSpike], finding: Finding, layer: str) -> Finding:
    """Information where every layer that spiked reaches the loss through a floor on a loss
    term in the graphs read (free nats: torch.max(kl, free), kl.clamp(min=free)): the
    term's gradient reaches them only at the steps it rises above the floor, so their norm
    jumps there by design."""
    if not all(run.params[x.tensor].below_floor for x in found):
        return finding
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message}: `{layer}` (and every layer that spiked) reaches the loss "
        "through a floor on a loss term (a KL's free nats, torch.max(kl, free_nats)), whose "
        "gradient reaches it only at the steps the term rises above the floor",
        advice="nothing to fix if the floor is meant (free nats hold the KL until it rises "
        "above them); if the spikes come with a loss spike, " + finding.advice,
    )


def _clip_advice(clip: str) -> str:
    """What to say of clipping: advise it only to a script that does not clip already."""
    if clip == "scaled":
        return "; the script clips scaled gradients, which bounds nothing (see clip-before-unscale)"
    if clip:
        return f"; the script already clips (max_norm {clip}), which caps the step, not its cause"
    return "; clip the gradient norm if such batches are expected"


def _passes(x: LayerSpike, members: tuple[int, ...], names: list[str], t: Thresholds) -> bool:
    if x.tensor >= len(names) or (members and x.tensor not in members):
        return False
    if x.ratio < LAYER_RATIO or x.sigmas < t.spike_sigma or x.over_high < LAYER_HIGH:
        return False
    if not (math.isfinite(x.total) and x.total_median > 0):
        return False  # a step that overflowed: GS401's
    return x.value >= LAYER_SHARE * x.total_median and rest_moved(x) <= x.ratio / LAYER_ALONE


def rest_moved(x: LayerSpike) -> float:
    """How far the rest of the gradient (the total without this tensor) moved at the step,
    against its usual size (the medians' difference in squares); inf where the tensor is
    usually the whole gradient."""
    usual = x.total_median**2 - x.median**2
    if usual <= 0:
        return math.inf
    return math.sqrt(max(x.total**2 - x.value**2, 0.0) / usual)
